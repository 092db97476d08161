"""gpt1.reporting.sections: what ran, the headline results beside their baselines, pretraining,
fine-tuning (the median and spread over seeds beside the majority class and the paper), the
held-out text, the model's text and the run's files, from the fixtures' long table."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import polars as pl
import pytest

from gpt1.reporting.document import Section, Table, markdown_section
from gpt1.reporting.page import render_markdown
from gpt1.reporting.run import Run, RunFacts
from gpt1.reporting.sections import (
    files_section,
    finetune_section,
    glue_beside_paper,
    headline_rows,
    headline_text,
    heldout_section,
    pretrain_section,
    run_section,
    sample_section,
)
from tests.conftest import assert_tables_well_formed
from tests.report_fixtures import FILES, TASKS, read_fixture_run

FACTS = RunFacts(commit="0123456789abcdef0123", uncommitted_changes=False, preset="tiny",
                 data_root="gpt1/sample_data", sample=True,
                 trained=[("pretraining", "cuda, bf16 autocast, compiled; CPU x86_64, GPU H200"),
                          ("fine-tuning", "cpu, fp32; the same machine")],
                 stages=pl.DataFrame({"stage": ["ingest", "pretrain"], "seconds": [1.5, 120.5],
                                      "finished": ["2025-01-01T10:00:00+00:00",
                                                   "2025-01-01T10:02:00+00:00"],
                                      "commit": ["0123456789abcdef0123", "fedcba9876543210"],
                                      "uncommitted_changes": [False, False]}),
                 built="2025-01-01 10:05 UTC")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return Run.of(TASKS, read_fixture_run(tmp_path_factory.mktemp("run")), FILES)


def _lines(section: Section) -> list[str]:
    return markdown_section(section)


def _row(lines: list[str], first_cell: str) -> list[str]:
    rows = [[cell.strip() for cell in line.strip("|").split("|")]
            for line in lines if line.startswith("|")]
    (row,) = [r for r in rows if r[0] == first_cell]
    return row


def _table(section: Section, index: int = 0) -> Table:
    return [b for b in section.blocks if isinstance(b, Table)][index]


def test_task_row_has_median_spread_seeds_majority_and_the_paper(run: Run) -> None:
    lines = _lines(finetune_section(run))
    # SST-2's last epoch: 80.0, 78.5, 81.25; the majority class 50.92; the paper 91.3
    assert _row(lines, "SST-2") == ["SST-2", "accuracy", "80.0", "[78.5, 81.2]", "3", "50.9",
                                    "91.3", "67,349"]


def test_secondary_metrics_and_extra_dev_splits(run: Run) -> None:
    lines = _lines(finetune_section(run))
    assert _row(lines, "MRPC")[1:6] == ["f1 (accuracy 70.0)", "80.0", "[79.0, 81.0]", "3",
                                        "81.2"]
    assert _row(lines, "MNLI")[2] == "60.0" and _row(lines, "MNLI")[6] == "82.1"
    assert _row(lines, "MNLI (dev_mismatched)")[2] == "62.0"
    assert _row(lines, "MNLI (dev_mismatched)")[5:7] == ["35.2", "81.4"]


def test_task_not_run_says_why(run: Run) -> None:
    lines = _lines(finetune_section(run))
    assert "- RTE: data not found at /data/glue/RTE/train.tsv" in lines
    # one line per reason, its tasks in registry order
    assert "- SNLI, QNLI, SciTail, QQP, STS-B, Story Cloze, RACE: not in finetune.tasks" in lines
    assert not any(line.startswith("| RTE") for line in lines)


def test_what_the_context_cut_is_told_per_task(run: Run) -> None:
    """The fixtures' SST-2 cut 12 train and 1 dev examples to fit n_ctx 512 (median 540.5 and
    530 tokens uncut); the other tasks that ran cut none."""
    text = "\n".join(_lines(finetune_section(run)))
    assert ("Examples longer than the context, cut to fit it (the texts lose their ends, "
            "longest first): SST-2 (n_ctx 512): train 12 of 67,349 (median 540 tokens), dev 1 of "
            "872 (median 530 tokens).") in text
    assert "No example was cut in CoLA (n_ctx 512), MNLI (n_ctx 512), MRPC (n_ctx 512)." in text


def test_rows_follow_the_registry_and_link_plots(run: Run) -> None:
    linked = run.with_plots({"sst2": "plots/sst2.png"})
    text = "\n".join(_lines(finetune_section(linked)))
    assert text.index("| CoLA |") < text.index("[SST-2](plots/sst2.png)") < text.index("| MRPC |")
    assert "![SST-2 curves](plots/sst2.png)" in text


def test_glue_beside_the_paper_on_the_same_tasks(run: Run) -> None:
    # each GLUE task's first metric, MNLI over its two dev splits; RTE not run. Ours: CoLA mcc 25,
    # SST-2 80, MNLI 60 and 62, MRPC F1 80. The paper's Table 4 for the same: 45.4, 91.3, 82.1
    # and 81.4, 82.3
    titles, ours, paper = glue_beside_paper(run)
    assert titles == ["CoLA", "SST-2", "MNLI", "MRPC"]
    assert ours == pytest.approx((25.0 + 80.0 + (60.0 + 62.0) / 2 + 80.0) / 4)
    assert paper == pytest.approx((45.4 + 91.3 + (82.1 + 81.4) / 2 + 82.3) / 4)
    text = "\n".join(_lines(finetune_section(run)))
    assert ("GLUE tasks fine-tuned here (CoLA, SST-2, MNLI, MRPC): ours 61.5 on average, the "
            "paper's 75.2 on the same tasks") in text
    assert "the paper's GLUE score, over all nine tasks' test sets: 72.8" in text


def test_no_glue_comparison_without_a_glue_task(run: Run) -> None:
    tasks = {name: task.model_copy(update={"glue": False}) for name, task in run.tasks.items()}
    alone = dataclasses.replace(run, tasks=tasks)
    assert glue_beside_paper(alone) is None
    assert "GLUE" not in "\n".join(_lines(finetune_section(alone)))


def test_pretraining_rows_for_both_trunks(run: Run) -> None:
    lines = _lines(pretrain_section(run))
    assert lines[0] == "## Pretraining"
    assert _row(lines, "Transformer") == ["Transformer", "400", "1,638,400", "5,432,100",
                                          "4.5679", "4.9877", "146.62", "6.5432", "12,346",
                                          "12.3%", "2.5 s"]
    assert _row(lines, "LSTM (Table 5's control)")[5] == "5.4321"
    assert "the first step of each session (where torch.compile compiles the step) is left out" \
        in " ".join(lines)
    plotted = "\n".join(_lines(pretrain_section(run.with_plots(
        {"pretraining": "plots/pretraining.png"}))))
    assert "![pretraining loss](plots/pretraining.png)" in plotted


def test_an_imported_model_says_where_it_came_from(run: Run) -> None:
    imported = {"run": True, "source": "openai", "source_dir": "../release/model",
                "model_type": "gpt1", "parameters": 116_537_856, "vocab_size": 40_482,
                "n_ctx": 512, "n_embd": 768, "n_layer": 12, "n_head": 12, "seconds": 7.8}
    data = dataclasses.replace(run.data, pretrain=imported, pretrain_lstm={
        "run": False, "reason": "pretrain.source is openai"})
    text = "\n".join(_lines(pretrain_section(Run.of(TASKS, data, FILES))))
    assert text.startswith("## Pretrained model")
    assert ("Imported from OpenAI's released GPT-1 in `../release/model` (pretrain.source "
            "openai), not pretrained here: 12 layers x 768, 12 heads, n_ctx 512, 40,482 tokens"
            ) in text


def test_held_out_text_sits_beside_the_val_loss_and_the_unigram_baseline(run: Run) -> None:
    lines = _lines(heldout_section(run))
    assert _row(lines, "books/kept.txt") == ["books/kept.txt", "123,456", "98,765", "3.2100",
                                             "24.78", "4.0120", "55.27", "6.5000"]
    assert _row(lines, "all")[3] == "3.2100"
    assert "the validation loss 3.1000 (unigram 6.4000)" in "\n".join(lines)
    assert_tables_well_formed(lines)
    skipped = dataclasses.replace(run.data, lm_eval={"run": False,
                                                     "reason": "no held-out text named"})
    assert _lines(heldout_section(Run.of(TASKS, skipped, FILES)))[2] == \
        "Not scored: no held-out text named."


def test_headline_results_beside_baselines_and_the_paper(run: Run) -> None:
    rows = {row[0]: row[1:] for row in headline_rows(run)}
    assert rows["pretraining val loss (nats/token)"] == ["4.988", "unigram 6.543", ""]
    assert rows["held-out text loss (nats/token)"] == ["3.210", "unigram 6.500", ""]
    assert rows["SST-2 accuracy (dev)"] == ["80.0 [78.5, 81.2]", "majority class 50.9", "91.3"]
    assert rows["CoLA mcc (dev)"] == ["25.0 [20.0, 30.0]", "majority class 0.0", "45.4"]
    assert rows["Table 5: SST-2 accuracy, 1,000 train, full model"] == [
        "80.1 [79.0, 81.2]", "no_pretrain 60.0 [58.0, 61.0]", "91.3 vs 84.0"]
    assert "Table 5: SST-2 accuracy, 67,349 train, full model" in rows
    assert not any(name.startswith("RTE") for name in rows)  # it did not run
    # pretraining first, then the tasks in registry order, then Table 5
    names = list(rows)
    assert names.index("CoLA mcc (dev)") < names.index("SST-2 accuracy (dev)") \
        < names.index("MRPC f1 (dev)") < names.index(
        "Table 5: SST-2 accuracy, 1,000 train, full model")


def test_headline_text_is_short(run: Run) -> None:
    text = headline_text(run, FACTS)
    lines = text.splitlines()
    assert len(lines) <= 12 and text.endswith("\n")
    assert lines[0].startswith("gpt1 run report: preset tiny, the bundled synthetic sample")
    assert lines[0].endswith("2 min 02 s")  # 1.5 + 120.5 s
    assert lines[1].split() == ["result", "ours", "baseline", "paper"]
    # the losses, then Table 5's full against no_pretrain, then the tasks in registry order
    assert [line.split("  ")[0] for line in lines[3:10]] == [
        "pretraining val loss (nats/token)", "held-out text loss (nats/token)",
        "Table 5: SST-2 accuracy, 1,000 train, full model",
        "Table 5: SST-2 accuracy, 67,349 train, full model", "CoLA mcc (dev)",
        "SST-2 accuracy (dev)", "MNLI accuracy (dev)"]
    assert len(headline_rows(run)) == 8 and lines[-1] == "(and 1 more row in the report)"
    assert headline_text(run, FACTS, limit=5).splitlines()[-1] == \
        "(and 3 more rows in the report)"


def test_what_ran(run: Run) -> None:
    lines = _lines(run_section(FACTS))
    text = "\n".join(lines)
    assert "- commit: 0123456789ab" in lines
    assert "- preset: tiny" in lines
    assert "- data: `gpt1/sample_data` (the bundled synthetic sample)" in lines
    assert "- pretraining: cuda, bf16 autocast, compiled; CPU x86_64, GPU H200" in lines
    assert "- fine-tuning: cpu, fp32; the same machine" in lines
    assert ("- wall time: 2 min 02 s over 2 stages (the report's own not counted); finished "
            "2025-01-01 10:00 to 2025-01-01 10:02 UTC") in lines
    assert _row(lines, "pretrain") == ["pretrain", "2 min 00 s"]
    assert "Some stages last ran at another commit (fedcba987654)" in text
    assert_tables_well_formed(lines)


def test_the_sample_is_called_what_it_is(run: Run) -> None:
    text = render_markdown([run_section(FACTS)], FACTS)
    assert text.startswith("# gpt1 run report\n\n> **These figures exercise the code on a small "
                           "synthetic sample (`gpt1/sample_data`) and say nothing about GPT-1 "
                           "on real data.")
    assert "`gpt1 set ingest.root=../shared/data && gpt1 preset books && dvc repro`" in text
    real = dataclasses.replace(FACTS, data_root="../shared/data", sample=False)
    assert "synthetic" not in render_markdown([run_section(real)], real)


def test_the_models_text(run: Run) -> None:
    text = "\n".join(_lines(sample_section(run)))
    assert "> **the rain fell steadily that evening, and** she walked down to the harbour " \
           "<b>alone</b>." in text
    assert "temperature 0.8, top_k 40, seed 1234 (params `lm_eval.sample`)" in text
    missing = Run.of(TASKS, dataclasses.replace(run.data, generated=None), FILES)
    assert "run lm_eval" in "\n".join(_lines(sample_section(missing)))


def test_links_are_relative_to_the_run(run: Run) -> None:
    text = "\n".join(_lines(files_section(run, ["[index.html](index.html)"])))
    assert "[pretrained model](../artifacts/pretrain/)" in text
    assert "[SST-2 dev](../artifacts/finetune/sst2/dev_predictions.tsv)" in text
    assert "[MNLI dev_mismatched](../artifacts/finetune/mnli/dev_mismatched_predictions.tsv)" \
        in text
    assert "[metrics/pretrain.json](../metrics/pretrain.json)" in text
    assert "RTE" not in text  # not run: nothing to link


def test_markdown_tables_are_well_formed(run: Run, tmp_path: Path) -> None:
    for section in (finetune_section(run), pretrain_section(run), heldout_section(run)):
        assert_tables_well_formed(_lines(section))
