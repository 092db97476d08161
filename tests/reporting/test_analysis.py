"""gpt1.reporting.analysis and the report stage's analysis inputs: Table 5 (ablations) and
Figure 2 (layers transferred, zero-shot behaviour) from the long table, beside the paper's. (The
stage writing the whole report, tasks.report: tests/tasks/test_report.py.)"""

from __future__ import annotations

import dataclasses
import statistics
from pathlib import Path

import matplotlib.pyplot as plt
import pytest

from gpt1.reporting.analysis import (
    PAPER_TABLE5,
    PAPER_TABLE5_AVERAGE,
    ablation_section,
    analysis_sections,
    normalise,
    transfer_curves,
    transfer_section,
    zero_shot_curves,
    zero_shot_section,
)
from gpt1.reporting.document import Section, Table, markdown_section, markdown_table
from gpt1.reporting.files import read_run
from gpt1.reporting.page import write_plots
from gpt1.reporting.run import Run
from tests.conftest import assert_tables_well_formed
from tests.report_fixtures import (
    ABLATION,
    FILES,
    NOT_RUN,
    PARAMS,
    TASKS,
    ablation_file,
    read_fixture_run,
    write_run,
)

VARIANTS = ["full", "no_pretrain", "no_aux", "lstm"]
ABLATION_TASKS = ["sst2", "story_cloze"]
# a cell that did not run, short, with its reason once below the table
NOT_RUN_CELL = "not run (1)"
NOT_RUN_NOTE = "- (1) data not found at /data/story_cloze.csv"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return Run.of(TASKS, read_fixture_run(tmp_path_factory.mktemp("run")), FILES)


def _with(run: Run, **files: object) -> Run:
    """`run` with some of its files replaced (RunData's fields)."""
    return Run.of(TASKS, dataclasses.replace(run.data, **files), FILES)


def _lines(section: Section) -> list[str]:
    return markdown_section(section)


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


def test_ablation_table_rows_columns_and_the_papers_figures(run: Run) -> None:
    lines = _lines(ablation_section(run, VARIANTS, ABLATION_TASKS))
    assert lines[0] == "## Ablations (Table 5)"
    assert_tables_well_formed(lines)
    (table,) = _tables(lines)
    assert table[0] == ["variant", "SST-2 acc (1,000 train)", "SST-2 acc (67,349 train)",
                        "paper SST-2 acc", "Story Cloze acc"]  # Table 5 has no Story Cloze
    assert table[1:] == [
        ["Transformer w/ aux LM (full)", "80.1 [79.0, 81.2]", "90.0 [89.5, 90.5]", "91.3",
         NOT_RUN_CELL],
        ["Transformer w/o pre-training", "60.0 [58.0, 61.0]", "82.0 [81.0, 83.0]", "84.0",
         NOT_RUN_CELL],
        ["Transformer w/o aux LM", "79.0 [78.0, 81.5]", "90.2 [90.0, 91.0]", "92.0",
         NOT_RUN_CELL],
        ["LSTM w/ aux LM", "70.0 [69.0, 71.0]", "88.0 [87.0, 89.0]", "90.5", NOT_RUN_CELL],
    ]
    assert lines.count(NOT_RUN_NOTE) == 1
    assert "Radford et al. 2018, Table 5" in "\n".join(lines)


def test_the_variants_follow_the_params_order(run: Run) -> None:
    (table,) = _tables(_lines(ablation_section(run, ["lstm", "full", "no_pretrain"],
                                               ABLATION_TASKS)))
    assert [row[0] for row in table[1:]] == ["LSTM w/ aux LM", "Transformer w/ aux LM (full)",
                                             "Transformer w/o pre-training"]
    assert [row[3] for row in table[1:]] == ["90.5", "91.3", "84.0"]


def test_a_variant_that_did_not_run_fills_its_row_with_why(run: Run) -> None:
    ablation = {**ABLATION, "lstm": {"sst2": {"variant": "lstm", "task": "sst2", **NOT_RUN},
                                     "story_cloze": ABLATION["lstm"]["story_cloze"]}}
    lines = _lines(ablation_section(_with(run, ablation=ablation), VARIANTS, ABLATION_TASKS))
    (table,) = _tables(lines)
    assert table[4] == ["LSTM w/ aux LM", NOT_RUN_CELL, NOT_RUN_CELL, "90.5", NOT_RUN_CELL]
    assert lines.count(NOT_RUN_NOTE) == 1
    assert table[1][1] == "80.1 [79.0, 81.2]"


def test_full_against_no_pretrain_one_line_per_task_and_size(run: Run) -> None:
    text = "\n".join(_lines(ablation_section(run, VARIANTS, ABLATION_TASKS)))
    # 80.1 - 60.04 = 20.06; full's min 79.0 above no_pretrain's max 61.0
    assert ("- SST-2 (1,000 train): full beats no_pretrain, +20.1 points (80.1 against 60.0, "
            "medians over seeds 1, 2, 3; the spreads do not overlap).") in text
    assert ("- SST-2 (67,349 train): full beats no_pretrain, +8.0 points (90.0 against 82.0, "
            "medians over seeds 1, 2, 3; the spreads do not overlap).") in text
    assert ("- Story Cloze: no comparison, full not run (data not found at "
            "/data/story_cloze.csv); no_pretrain not run (data not found at "
            "/data/story_cloze.csv).") in text
    assert text.index("(1,000 train): full") < text.index("(67,349 train): full")


def test_no_pretrain_winning_reads_as_a_loss(run: Run) -> None:
    ablation = {"full": {"sst2": ablation_file("full", "sst2", (1000, 1000, (50.0, 55.0, 61.0)))},
                "no_pretrain": {"sst2": ablation_file("no_pretrain", "sst2",
                                                      (1000, 1000, (52.0, 57.5, 58.0)))}}
    lost = _with(run, ablation=ablation)
    text = "\n".join(_lines(ablation_section(lost, ["full", "no_pretrain"], ["sst2"])))
    assert ("full does not beat no_pretrain, -2.5 points (55.0 against 57.5, medians over seeds "
            "1, 2, 3; the spreads overlap)") in text
    alone = _with(run, ablation={"full": ablation["full"]})
    assert "needs both `full` and `no_pretrain`" in "\n".join(
        _lines(ablation_section(alone, ["full"], ["sst2"])))


def test_ablations_that_all_did_not_run_take_one_line(run: Run) -> None:
    ablation = {v: {"story_cloze": ABLATION[v]["story_cloze"]} for v in ABLATION}
    assert _lines(ablation_section(_with(run, ablation=ablation), VARIANTS,
                                   ["story_cloze"])) == [
        "## Ablations (Table 5)", "", "Nothing ran: data not found at /data/story_cloze.csv.", ""]
    assert _lines(ablation_section(_with(run, ablation={}), VARIANTS, []))[2] == \
        "No ablation configured."


def test_transfer_table_and_gain(run: Run) -> None:
    lines = _lines(transfer_section(run.with_plots({"transfer": "plots/transfer.png"}),
                                    ["rte", "story_cloze"]))
    assert lines[0] == "## Layers transferred (Figure 2, left)"
    assert "![layers transferred](plots/transfer.png)" in lines
    assert_tables_well_formed(lines)
    (table,) = _tables(lines)
    assert table == [
        ["task", "split", "k=0", "k=1", "k=2", "k=3", "k=4"],
        ["RTE accuracy (2,490 train)", "dev", "52.0", "53.5", "54.0", "57.2", "58.5"],
        ["Story Cloze", NOT_RUN_CELL, "", "", "", "", ""],
    ]
    assert NOT_RUN_NOTE in lines
    assert ("- RTE accuracy (2,490 train): all 4 layers against none: +6.5 points (medians over "
            "seeds 1, 2, 3).") in lines


def test_transfer_curves_are_median_min_max_by_layer(run: Run) -> None:
    curves = transfer_curves(run)
    assert list(curves) == ["RTE accuracy (2,490 train)"]  # Story Cloze did not run
    assert curves["RTE accuracy (2,490 train)"][3] == (3, 57.25, 55.25, 58.25)


def test_transfer_nothing_ran(run: Run) -> None:
    nothing = _with(run, transfer={"story_cloze": {"task": "story_cloze", **NOT_RUN}})
    assert _lines(transfer_section(nothing, ["story_cloze"]))[2] == \
        "Nothing ran: data not found at /data/story_cloze.csv."
    assert _lines(transfer_section(_with(run, transfer={}), []))[2] == \
        "No transfer task configured."


def test_normalised_between_chance_and_the_fine_tuned_figure(run: Run) -> None:
    # SST-2 fine-tuned to 80.0 (the normalisation's ceiling), chance 50; CoLA to 25.0, chance 0
    assert normalise(62.0, 50.0, 74.0) == pytest.approx(0.5)  # (62 - 50) / (74 - 50)
    normalised, above = zero_shot_curves(run)
    assert list(normalised) == list(above) == ["Transformer", "LSTM"]
    assert normalised["Transformer"]["SST-2"][3] == (100, pytest.approx(10.1 / 30))
    assert normalised["LSTM"]["SST-2"][-1] == (300, pytest.approx(3 / 30))
    assert normalised["Transformer"]["CoLA"][-1] == (300, pytest.approx(6 / 25))
    assert above["Transformer"]["SST-2"][0] == (0, pytest.approx(0.2))
    assert above["LSTM"]["CoLA"] == [(0, 0.0), (10, 0.0), (30, 1.0), (100, 1.0), (300, 2.0)]
    assert "RACE" not in above["Transformer"]  # it did not run


def test_a_fine_tuned_figure_at_chance_or_missing_is_not_divided_by(run: Run) -> None:
    cola = run.data.finetune["cola"]
    at_chance = {**cola, "runs": [{**r, "epochs": [{**r["epochs"][-1],
                                                     "dev": {"dev": {"mcc": 0.0}}}]}
                                  for r in cola["runs"]]}
    for finetune in ({**run.data.finetune, "cola": at_chance},
                     {**run.data.finetune, "cola": {"run": False, "reason": "no data"}}):
        changed = _with(run, finetune=finetune)
        normalised, _ = zero_shot_curves(changed)
        assert list(normalised["Transformer"]) == ["SST-2"]
        text = "\n".join(_lines(zero_shot_section(changed, ["sst2", "cola", "race"])))
        assert "CoLA there alone (no fine-tuned figure above chance)" in text
        assert "| CoLA | acceptability | dev mcc | 500 (+500 train) | 0.0 |" in text
        assert text.count("| n/a | n/a |") == 1


def test_zero_shot_tables_raw_scores_and_references(run: Run) -> None:
    lines = _lines(zero_shot_section(run.with_plots({"zero_shot": "plots/zero_shot.png"}),
                                     ["sst2", "cola", "race"]))
    assert lines[0] == "## Zero-shot behaviour over pretraining (Figure 2, right)"
    assert "![zero-shot behaviour](plots/zero_shot.png)" in lines
    assert_tables_well_formed(lines)
    raw, references = _tables(lines)
    assert raw[0] == ["trunk", "step", "SST-2 accuracy", "CoLA mcc"]
    assert [row[:2] for row in raw[1:]] == [["Transformer", str(s)] for s in
                                            (0, 10, 30, 100, 300)] + [
        ["LSTM", str(s)] for s in (0, 10, 30, 100, 300)]
    assert raw[4] == ["Transformer", "100", "60.1", "4.0"]
    assert raw[10] == ["LSTM", "300", "53.0", "2.0"]
    assert references == [
        ["task", "heuristic", "scored on", "examples", "chance", "fine-tuned (ours)",
         "Transformer, step 300, normalised", "LSTM, step 300, normalised"],
        ["SST-2", "sentiment", "dev accuracy", "500", "50.0", "80.0", "0.40", "0.10"],
        ["CoLA", "acceptability", "dev mcc", "500 (+500 train)", "0.0", "25.0", "0.24", "0.08"],
    ]
    text = "\n".join(lines)
    assert "- RACE: not run: data not found at /data/RACE/train/middle." in text
    assert "solid: Transformer; dashed: LSTM." in text


def test_zero_shot_without_the_lstm(run: Run) -> None:
    zero_shot = {task: {**entry, "trunks": {"gpt1": entry["trunks"]["gpt1"]}}
                 if entry["run"] else entry for task, entry in run.data.zero_shot.items()}
    gpt1_only = _with(run, zero_shot=zero_shot)
    normalised, above = zero_shot_curves(gpt1_only)
    assert list(normalised) == list(above) == ["Transformer"]
    lines = _lines(zero_shot_section(gpt1_only, ["sst2", "cola", "race"]))
    raw, references = _tables(lines)
    assert [row[0] for row in raw[1:]] == ["Transformer"] * 5
    assert references[0][-1] == "Transformer, step 300, normalised"
    assert not any(line.startswith("![") for line in lines)


def test_zero_shot_nothing_ran(run: Run) -> None:
    nothing = _with(run, zero_shot={"race": run.data.zero_shot["race"]})
    assert _lines(zero_shot_section(nothing, ["race"])) == [
        "## Zero-shot behaviour over pretraining (Figure 2, right)", "",
        "Nothing ran: data not found at /data/RACE/train/middle.", ""]


def test_sections_in_order_and_every_table_well_formed(run: Run) -> None:
    sections = analysis_sections(run.with_plots({"zero_shot": "plots/zero_shot.png"}), VARIANTS,
                                 ABLATION_TASKS, ["rte", "story_cloze"],
                                 ["sst2", "cola", "race"])
    lines = [line for section in sections for line in _lines(section)]
    headings = [line for line in lines if line.startswith("## ")]
    assert headings == ["## Ablations (Table 5)", "## Layers transferred (Figure 2, left)",
                        "## Zero-shot behaviour over pretraining (Figure 2, right)"]
    assert "![zero-shot behaviour](plots/zero_shot.png)" in lines
    assert not any(line.startswith("![layers") for line in lines)  # no transfer plot named
    assert_tables_well_formed(lines)
    assert len(_tables(lines)) == 4


def test_the_stage_reads_every_file_params_names(tmp_path: Path) -> None:
    write_run(tmp_path)
    data = read_run(PARAMS, FILES, tmp_path)
    assert list(data.ablation) == PARAMS.analysis.ablation.variants
    assert all(list(tasks) == list(PARAMS.analysis.ablation.tasks)
               for tasks in data.ablation.values())
    assert list(data.transfer) == list(PARAMS.analysis.transfer.tasks)
    assert list(data.zero_shot) == list(PARAMS.analysis.zero_shot.tasks)
    assert [r["stage"] for r in data.stages] == ["ingest", "clean", "pretrain", "finetune@sst2",
                                                 "ablation@full-sst2", "report"]
    assert data.curves.filter(data.curves["split"] == "val")["loss"].to_list() == [6.2, 5.0]
    (tmp_path / "metrics" / "transfer" / "rte.json").unlink()
    with pytest.raises(FileNotFoundError, match="run transfer@rte first"):
        read_run(PARAMS, FILES, tmp_path)
    (tmp_path / "metrics" / "ablation" / "no_aux" / "sst2.json").unlink()
    with pytest.raises(FileNotFoundError, match="run ablation@no_aux-sst2 first"):
        read_run(PARAMS, FILES, tmp_path)


def test_the_stage_writes_every_plot_where_something_ran(run: Run, tmp_path: Path) -> None:
    links = write_plots(run, VARIANTS, tmp_path, "plots/")
    # per-task curves where a run trained 2 epochs or more: SST-2 alone here
    assert links == {name: f"plots/{name}.png" for name in
                     ("pretraining", "finetune", "sst2", "table5", "transfer", "zero_shot")}
    for name in links:
        assert (tmp_path / f"{name}.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert plt.get_fignums() == []
    nothing = _with(run, transfer={"story_cloze": {"task": "story_cloze", **NOT_RUN}},
                    zero_shot={"race": run.data.zero_shot["race"]},
                    ablation={v: {"story_cloze": ABLATION[v]["story_cloze"]} for v in ABLATION})
    (tmp_path / "none").mkdir()
    assert set(write_plots(nothing, VARIANTS, tmp_path / "none", "plots/")) == {
        "pretraining", "finetune", "sst2"}


def test_zero_shot_without_snapshots_says_so(run: Run) -> None:
    # an imported model keeps no pretraining snapshots: each task ran, none was scored
    zero_shot = {task: {**entry, "trunks": {}} if entry["run"] else entry
                 for task, entry in run.data.zero_shot.items()}
    lines = _lines(zero_shot_section(_with(run, zero_shot=zero_shot), ["sst2", "cola", "race"]))
    assert lines[2].startswith("No pretraining snapshot to score: the model was not pretrained")
    assert not _tables(lines)


def test_not_run_cells_are_numbered_by_reason() -> None:
    table = Table(["task", "a", "b"], [["x", "not run: one", "not run: two"],
                                       ["y", "1.0", "not run: one"]])
    assert markdown_table(table) == [
        "| task | a | b |", "|---|---:|---:|",
        "| x | not run (1) | not run (2) |", "| y | 1.0 | not run (1) |",
        "", "- (1) one", "- (2) two"]
