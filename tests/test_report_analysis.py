"""gpt1.reporting.analysis and the report stage's analysis inputs: Table 5 (ablations) and
Figure 2 (layers transferred, zero-shot behaviour) rendered beside the paper's."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pytest

from gpt1.config import load_params
from gpt1.reporting.analysis import (
    PAPER_TABLE5,
    PAPER_TABLE5_AVERAGE,
    Analysis,
    ablation_section,
    analysis_sections,
    normalise,
    transfer_curves,
    transfer_section,
    zero_shot_curves,
    zero_shot_section,
)
from tasks import report
from tasks.report import read_analysis, write_analysis_plots
from tests.conftest import assert_tables_well_formed

PARAMS = load_params(Path(__file__).resolve().parents[1] / "params.yaml")
TASKS = PARAMS.tasks


def _summary(median: float, low: float, high: float) -> dict[str, float]:
    return {"median": median, "min": low, "max": high}


def _run(seed: int) -> dict[str, Any]:
    return {"seed": seed, "steps": 96, "train_loss": 0.41, "seconds": 20.1,
            "epochs": [{"epoch": 1, "train_loss": 0.6, "dev": {"dev": {"accuracy": 75.0}}}]}


def _fine_tuned(size: int | None, train: int, median: float, low: float,
                high: float) -> dict[str, Any]:
    return {"max_train_examples": size, "metrics": ["accuracy"], "seeds": [1, 2, 3],
            "lm_coef": 0.5, "train_examples": train, "eval_examples": {"dev": 872},
            "dev": {"dev": {"accuracy": _summary(median, low, high)}},
            "runs": [_run(seed) for seed in (1, 2, 3)]}


def _ablation(variant: str, task: str, *sizes: dict[str, Any]) -> dict[str, Any]:
    return {"variant": variant, "task": task, "run": True, "sizes": list(sizes)}


def _not_run(**head: str) -> dict[str, Any]:
    return {**head, "run": False, "reason": "data not found at /data/story_cloze.csv"}


# SST-2 at 1,000 train examples and at all 67,349: the median, min and max over seeds
SCORES = {"full": ((80.1, 79.0, 81.2), (90.0, 89.5, 90.5)),
          "no_pretrain": ((60.04, 58.0, 61.0), (82.0, 81.0, 83.0)),
          "no_aux": ((79.0, 78.0, 81.5), (90.2, 90.0, 91.0)),
          "lstm": ((70.0, 69.0, 71.0), (88.0, 87.0, 89.0))}
ABLATION = {variant: {"sst2": _ablation(variant, "sst2", _fine_tuned(1000, 1000, *capped),
                                        _fine_tuned(None, 67349, *whole)),
                      "story_cloze": _not_run(variant=variant, task="story_cloze")}
            for variant, (capped, whole) in SCORES.items()}


def _layer(k: int, median: float) -> dict[str, Any]:
    return {"k": k, "dev": {"dev": {"accuracy": _summary(median, median - 2, median + 1)}},
            "runs": [_run(seed) for seed in (1, 2, 3)]}


RTE_MEDIANS = [52.0, 53.5, 54.0, 57.25, 58.5]
TRANSFER = {
    "rte": {"task": "rte", "run": True, "max_train_examples": None, "metrics": ["accuracy"],
            "seeds": [1, 2, 3], "lm_coef": 0.5, "n_layer": 4, "train_examples": 2490,
            "eval_examples": {"dev": 277},
            "layers": [_layer(k, m) for k, m in enumerate(RTE_MEDIANS)]},
    "story_cloze": _not_run(task="story_cloze"),
}

STEPS = [0, 10, 30, 100, 300]
ZERO_SHOT = {
    "tasks": {"sst2": {"run": True, "heuristic": "sentiment", "metric": "accuracy",
                       "split": "dev", "chance": 50.0, "examples": 500},
              "cola": {"run": True, "heuristic": "acceptability", "metric": "mcc",
                       "split": "dev", "chance": 0.0, "examples": 500, "train_examples": 500},
              "race": {"run": False, "reason": "data not found at /data/RACE/train/middle"}},
    "trunks": {"gpt1": {"steps": STEPS, "scores": {"sst2": [50.2, 51.0, 55.0, 60.1, 62.0],
                                                   "cola": [0.0, 1.0, 2.5, 4.0, 6.0]}},
               "lstm": {"steps": STEPS, "scores": {"sst2": [50.0, 50.0, 51.0, 52.0, 53.0],
                                                   "cola": [0.0, 0.0, 1.0, 1.0, 2.0]}}},
    "seconds": 12.3,
}
# SST-2 fine-tuned to 74.0 (the normalisation's ceiling); CoLA's fine-tuning did not run
FINETUNE = {"sst2": {"run": True, "seeds": [1, 2, 3], "train_examples": 67349,
                     "dev": {"dev": {"accuracy": _summary(74.0, 73.0, 75.0)}},
                     "runs": [_run(seed) for seed in (1, 2, 3)]},
            "cola": {"run": False, "reason": "data not found at /data/glue/CoLA/train.tsv"}}


def _tables(lines: list[str]) -> list[list[list[str]]]:
    """Every markdown table in `lines`, as rows of stripped cells (the rule row left out)."""
    tables: list[list[list[str]]] = []
    previous = ""
    for line in lines:
        if line.startswith("|"):
            if not previous.startswith("|"):
                tables.append([])
            if set(line) - set("|-:"):
                tables[-1].append([cell.strip() for cell in line.strip("|").split("|")])
        previous = line
    return tables


def test_the_papers_table5_rows_average_to_its_averages() -> None:
    # a mistyped figure would move the average: the paper rounds to 0.1 (LSTM: 69.16 -> 69.1)
    assert set(PAPER_TABLE5) == set(PAPER_TABLE5_AVERAGE) == {"full", "no_pretrain", "no_aux",
                                                              "lstm"}
    for variant, row in PAPER_TABLE5.items():
        assert set(row) == {"cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte"}
        assert set(row) <= set(TASKS)
        assert statistics.fmean(row.values()) == pytest.approx(PAPER_TABLE5_AVERAGE[variant],
                                                               abs=0.1)
    assert PAPER_TABLE5["no_pretrain"]["stsb"] == 30.9 and PAPER_TABLE5["lstm"]["rte"] == 54.6


def test_ablation_table_rows_columns_and_the_papers_figures() -> None:
    lines = ablation_section(TASKS, ABLATION)
    assert lines[0] == "## Ablations (Table 5)"
    assert_tables_well_formed(lines)
    (table,) = _tables(lines)
    assert table[0] == ["variant", "SST-2 acc (1,000 train)", "SST-2 acc (67,349 train)",
                        "paper SST-2 acc", "Story Cloze acc"]  # Table 5 has no Story Cloze
    not_run = "not run: data not found at /data/story_cloze.csv"
    assert table[1:] == [
        ["Transformer w/ aux LM (full)", "80.1 [79.0, 81.2]", "90.0 [89.5, 90.5]", "91.3",
         not_run],
        ["Transformer w/o pre-training", "60.0 [58.0, 61.0]", "82.0 [81.0, 83.0]", "84.0",
         not_run],
        ["Transformer w/o aux LM", "79.0 [78.0, 81.5]", "90.2 [90.0, 91.0]", "92.0", not_run],
        ["LSTM w/ aux LM", "70.0 [69.0, 71.0]", "88.0 [87.0, 89.0]", "90.5", not_run],
    ]
    assert "Radford et al. 2018, Table 5" in "\n".join(lines)


def test_the_variants_follow_the_params_order() -> None:
    swapped = {v: ABLATION[v] for v in ("lstm", "full", "no_pretrain")}
    (table,) = _tables(ablation_section(TASKS, swapped))
    assert [row[0] for row in table[1:]] == ["LSTM w/ aux LM", "Transformer w/ aux LM (full)",
                                             "Transformer w/o pre-training"]
    assert [row[3] for row in table[1:]] == ["90.5", "91.3", "84.0"]


def test_a_variant_that_did_not_run_fills_its_row_with_why() -> None:
    ablation = {**ABLATION, "lstm": {"sst2": _not_run(variant="lstm", task="sst2"),
                                     "story_cloze": ABLATION["lstm"]["story_cloze"]}}
    (table,) = _tables(ablation_section(TASKS, ablation))
    not_run = "not run: data not found at /data/story_cloze.csv"
    assert table[4] == ["LSTM w/ aux LM", not_run, not_run, "90.5", not_run]
    assert table[1][1] == "80.1 [79.0, 81.2]"


def test_full_against_no_pretrain_one_line_per_task_and_size() -> None:
    text = "\n".join(ablation_section(TASKS, ABLATION))
    # 80.1 - 60.04 = 20.06; full's min 79.0 above no_pretrain's max 61.0
    assert ("- SST-2 (1,000 train): full beats no_pretrain, +20.1 points (80.1 against 60.0, "
            "medians over seeds 1, 2, 3; the spreads do not overlap).") in text
    assert ("- SST-2 (67,349 train): full beats no_pretrain, +8.0 points (90.0 against 82.0, "
            "medians over seeds 1, 2, 3; the spreads do not overlap).") in text
    assert ("- Story Cloze: no comparison, full not run (data not found at "
            "/data/story_cloze.csv); no_pretrain not run (data not found at "
            "/data/story_cloze.csv).") in text
    assert text.index("(1,000 train): full") < text.index("(67,349 train): full")


def test_no_pretrain_winning_reads_as_a_loss() -> None:
    ablation = {"full": {"sst2": _ablation("full", "sst2", _fine_tuned(1000, 1000, 55.0, 50.0,
                                                                        61.0))},
                "no_pretrain": {"sst2": _ablation("no_pretrain", "sst2",
                                                  _fine_tuned(1000, 1000, 57.5, 52.0, 58.0))}}
    text = "\n".join(ablation_section(TASKS, ablation))
    assert ("full does not beat no_pretrain, -2.5 points (55.0 against 57.5, medians over seeds "
            "1, 2, 3; the spreads overlap)") in text
    alone = "\n".join(ablation_section(TASKS, {"full": ablation["full"]}))
    assert "needs both `full` and `no_pretrain`" in alone


def test_ablations_that_all_did_not_run_take_one_line() -> None:
    ablation = {v: {"story_cloze": ABLATION[v]["story_cloze"]} for v in ABLATION}
    assert ablation_section(TASKS, ablation) == [
        "## Ablations (Table 5)", "", "Nothing ran: data not found at /data/story_cloze.csv.", ""]


def test_transfer_table_and_gain() -> None:
    lines = transfer_section(TASKS, TRANSFER, "plots/transfer.png")
    assert lines[0] == "## Layers transferred (Figure 2, left)"
    assert "![layers transferred](plots/transfer.png)" in lines
    assert_tables_well_formed(lines)
    (table,) = _tables(lines)
    assert table == [
        ["task", "split", "k=0", "k=1", "k=2", "k=3", "k=4"],
        ["RTE accuracy (2,490 train)", "dev", "52.0", "53.5", "54.0", "57.2", "58.5"],
        ["Story Cloze", "not run: data not found at /data/story_cloze.csv", "", "", "", "", ""],
    ]
    assert ("- RTE accuracy (2,490 train): all 4 layers against none: +6.5 points (medians over "
            "seeds 1, 2, 3).") in lines


def test_transfer_curves_are_median_min_max_by_layer() -> None:
    curves = transfer_curves(TASKS, TRANSFER)
    assert list(curves) == ["RTE accuracy (2,490 train)"]  # Story Cloze did not run
    assert curves["RTE accuracy (2,490 train)"][3] == (3, 57.25, 55.25, 58.25)


def test_transfer_nothing_ran() -> None:
    lines = transfer_section(TASKS, {"story_cloze": TRANSFER["story_cloze"]}, None)
    assert lines[2] == "Nothing ran: data not found at /data/story_cloze.csv."
    assert transfer_section(TASKS, {}, None)[2] == "No transfer task configured."


def test_normalised_between_chance_and_the_fine_tuned_figure() -> None:
    assert normalise(62.0, 50.0, 74.0) == pytest.approx(0.5)  # (62 - 50) / (74 - 50)
    normalised, above = zero_shot_curves(TASKS, ZERO_SHOT, FINETUNE)
    assert list(normalised) == list(above) == ["Transformer", "LSTM"]
    assert normalised["Transformer"]["SST-2"][3] == (100, pytest.approx(10.1 / 24))
    assert normalised["LSTM"]["SST-2"][-1] == (300, pytest.approx(3 / 24))
    # CoLA was not fine-tuned: points above chance only; RACE did not run: nowhere
    assert list(normalised["Transformer"]) == ["SST-2"]
    assert list(above["Transformer"]) == ["SST-2", "CoLA"]
    assert above["Transformer"]["SST-2"][0] == (0, pytest.approx(0.2))
    assert above["LSTM"]["CoLA"] == [(0, 0.0), (10, 0.0), (30, 1.0), (100, 1.0), (300, 2.0)]


def test_a_fine_tuned_figure_at_chance_is_not_divided_by() -> None:
    at_chance = {**FINETUNE, "cola": {"run": True, "dev": {"dev": {"mcc": _summary(0.0, -1, 1)}}}}
    normalised, _ = zero_shot_curves(TASKS, ZERO_SHOT, at_chance)
    assert list(normalised["Transformer"]) == ["SST-2"]
    text = "\n".join(zero_shot_section(TASKS, ZERO_SHOT, at_chance, None))
    assert "| CoLA | acceptability | dev mcc | 500 (+500 train) | 0.0 | 0.0 | n/a | n/a |" in text


def test_zero_shot_tables_raw_scores_and_references() -> None:
    lines = zero_shot_section(TASKS, ZERO_SHOT, FINETUNE, "plots/zero_shot.png")
    assert lines[0] == "## Zero-shot behaviour over pretraining (Figure 2, right)"
    assert "![zero-shot behaviour](plots/zero_shot.png)" in lines
    assert_tables_well_formed(lines)
    raw, references = _tables(lines)
    assert raw[0] == ["trunk", "step", "SST-2 accuracy", "CoLA mcc"]
    assert [row[:2] for row in raw[1:]] == [["Transformer", str(s)] for s in STEPS] + [
        ["LSTM", str(s)] for s in STEPS]
    assert raw[4] == ["Transformer", "100", "60.1", "4.0"]
    assert raw[10] == ["LSTM", "300", "53.0", "2.0"]
    assert references == [
        ["task", "heuristic", "scored on", "examples", "chance", "fine-tuned (ours)",
         "Transformer, step 300, normalised", "LSTM, step 300, normalised"],
        ["SST-2", "sentiment", "dev accuracy", "500", "50.0", "74.0", "0.50", "0.12"],
        ["CoLA", "acceptability", "dev mcc", "500 (+500 train)", "0.0", "n/a", "n/a", "n/a"],
    ]
    text = "\n".join(lines)
    assert "- RACE: not run: data not found at /data/RACE/train/middle." in text
    assert "CoLA there alone (no fine-tuned figure above chance)" in text
    assert "solid: Transformer; dashed: LSTM." in text


def test_zero_shot_without_the_lstm() -> None:
    gpt1_only = {**ZERO_SHOT, "trunks": {"gpt1": ZERO_SHOT["trunks"]["gpt1"]}}
    normalised, above = zero_shot_curves(TASKS, gpt1_only, FINETUNE)
    assert list(normalised) == list(above) == ["Transformer"]
    lines = zero_shot_section(TASKS, gpt1_only, FINETUNE, None)
    raw, references = _tables(lines)
    assert [row[0] for row in raw[1:]] == ["Transformer"] * len(STEPS)
    assert references[0][-1] == "Transformer, step 300, normalised"
    assert not any(line.startswith("![") for line in lines)


def test_zero_shot_nothing_ran() -> None:
    nothing = {"tasks": {"race": ZERO_SHOT["tasks"]["race"]}, "trunks": {}, "seconds": 0.1}
    assert zero_shot_section(TASKS, nothing, FINETUNE, None) == [
        "## Zero-shot behaviour over pretraining (Figure 2, right)", "",
        "Nothing ran: data not found at /data/RACE/train/middle.", ""]


def test_sections_in_order_and_every_table_well_formed() -> None:
    lines = analysis_sections(TASKS, Analysis(ABLATION, TRANSFER, ZERO_SHOT), FINETUNE,
                              {"zero_shot": "plots/zero_shot.png"})
    headings = [line for line in lines if line.startswith("## ")]
    assert headings == ["## Ablations (Table 5)", "## Layers transferred (Figure 2, left)",
                        "## Zero-shot behaviour over pretraining (Figure 2, right)"]
    assert "![zero-shot behaviour](plots/zero_shot.png)" in lines
    assert not any(line.startswith("![layers") for line in lines)  # no transfer plot named
    assert_tables_well_formed(lines)
    assert len(_tables(lines)) == 4
    assert lines[-1] == ""


def _write(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def _write_inputs(root: Path) -> None:
    analysis = PARAMS.analysis
    for variant in analysis.ablation.variants:
        for task in analysis.ablation.tasks:
            _write(root / "metrics" / "ablation" / variant / f"{task}.json",
                   ABLATION[variant].get(task, _not_run(variant=variant, task=task)))
    for task in analysis.transfer.tasks:
        _write(root / "metrics" / "transfer" / f"{task}.json",
               TRANSFER.get(task, _not_run(task=task)))
    for task, result in _zero_shot_files().items():
        _write(root / "metrics" / "zero_shot" / f"{task}.json", result)


def _zero_shot_files() -> dict[str, dict[str, Any]]:
    """ZERO_SHOT as the zero_shot@<task> stages write it, a file per task of params (those
    ZERO_SHOT lacks not run)."""
    files = {}
    for task in PARAMS.analysis.zero_shot.tasks:
        entry = ZERO_SHOT["tasks"].get(task, _not_run())
        trunks = {trunk: {"steps": curve["steps"], "scores": curve["scores"][task]}
                  for trunk, curve in ZERO_SHOT["trunks"].items() if task in curve["scores"]}
        files[task] = {"task": task, **entry, **({"trunks": trunks} if entry["run"] else {}),
                       "seconds": 1.0}
    return files


def test_the_stage_reads_every_analysis_file_params_names(tmp_path: Path) -> None:
    _write_inputs(tmp_path)
    analysis = read_analysis(PARAMS, tmp_path)
    assert list(analysis.ablation) == PARAMS.analysis.ablation.variants
    assert all(list(tasks) == list(PARAMS.analysis.ablation.tasks)
               for tasks in analysis.ablation.values())
    assert list(analysis.transfer) == list(PARAMS.analysis.transfer.tasks)
    assert analysis.zero_shot == {
        "tasks": {task: ZERO_SHOT["tasks"].get(task, _not_run())
                  for task in PARAMS.analysis.zero_shot.tasks},
        "trunks": ZERO_SHOT["trunks"]}
    transfer = next(iter(PARAMS.analysis.transfer.tasks))
    (tmp_path / "metrics" / "transfer" / f"{transfer}.json").unlink()
    with pytest.raises(FileNotFoundError, match=f"run transfer@{transfer} first"):
        read_analysis(PARAMS, tmp_path)
    (tmp_path / "metrics" / "zero_shot" / "sst2.json").unlink()
    variant = PARAMS.analysis.ablation.variants[0]
    task = next(iter(PARAMS.analysis.ablation.tasks))
    (tmp_path / "metrics" / "ablation" / variant / f"{task}.json").unlink()
    with pytest.raises(FileNotFoundError, match=f"run ablation@{variant}-{task} first"):
        read_analysis(PARAMS, tmp_path)


def test_the_stage_writes_figure_2_where_something_ran(tmp_path: Path) -> None:
    analysis = Analysis(ABLATION, TRANSFER, ZERO_SHOT)
    links = write_analysis_plots(PARAMS, analysis, FINETUNE, tmp_path)
    assert links == {"transfer": "plots/transfer.png", "zero_shot": "plots/zero_shot.png"}
    for name in ("transfer", "zero_shot"):
        assert (tmp_path / f"{name}.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert plt.get_fignums() == []
    nothing = Analysis(ABLATION, {"story_cloze": TRANSFER["story_cloze"]},
                       {"tasks": {"race": ZERO_SHOT["tasks"]["race"]}, "trunks": {}})
    assert write_analysis_plots(PARAMS, nothing, FINETUNE, tmp_path / "none") == {}


def test_the_stage_renders_every_section(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write_inputs(tmp_path)
    pretrain = {"steps": 400, "tokens": 1_638_400, "parameters": 5_432_100, "train_loss": 4.5,
                "val_loss": 4.9, "val_perplexity": 134.3, "unigram_val_loss": 6.5,
                "tokens_per_second": 12345.6, "mfu": 0.12}
    _write(tmp_path / "metrics" / "pretrain.json", pretrain)
    _write(tmp_path / "metrics" / "lm_eval.json", {"run": False, "reason": "nothing named"})
    for name in TASKS:
        _write(tmp_path / "metrics" / "finetune" / f"{name}.json",
               FINETUNE.get(name, {"run": False, "reason": "not in finetune.tasks"}))
    monkeypatch.chdir(tmp_path)
    report.run(PARAMS)
    text = (tmp_path / "reports" / "summary.md").read_text()
    assert text.index("## Fine-tuning") < text.index("## Ablations (Table 5)") \
        < text.index("## Layers transferred") < text.index("## Zero-shot behaviour")
    for plot in ("transfer", "zero_shot"):
        assert f"(plots/{plot}.png)" in text
        assert (tmp_path / "reports" / "plots" / f"{plot}.png").is_file()
    assert "| Transformer w/ aux LM (full) | 80.1 [79.0, 81.2] |" in text
    assert_tables_well_formed(text.splitlines())
