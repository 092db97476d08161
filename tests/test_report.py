"""gpt1.reporting.report: the summary puts our figures (median and spread over seeds) beside the
paper's."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpt1.config import load_params
from gpt1.reporting.report import glue_average, metric_rows, render_summary
from tests.conftest import assert_tables_well_formed

TASKS = load_params(Path(__file__).resolve().parents[1] / "params.yaml").tasks
PRETRAIN = {"steps": 400, "tokens": 1_638_400, "parameters": 5_432_100, "train_loss": 4.56789,
            "val_loss": 4.98765, "val_perplexity": 146.62, "unigram_val_loss": 6.54321,
            "tokens_per_second": 12345.6, "mfu": 0.1234}


def _summary(median: float, low: float, high: float) -> dict[str, float]:
    return {"median": median, "min": low, "max": high}


def _ran(dev: dict[str, dict[str, dict[str, float]]], seeds: int = 3) -> dict:
    return {"run": True, "seeds": list(range(seeds)), "dev": dev, "train_examples": 67349}


SST2 = _ran({"dev": {"accuracy": _summary(78.44, 77.0, 80.15)}})
MRPC = _ran({"dev": {"f1": _summary(80.0, 79.0, 81.0), "accuracy": _summary(70.0, 69.0, 71.0)}})
MNLI = _ran({"dev": {"accuracy": _summary(60.0, 59.0, 61.0)},
             "dev_mismatched": {"accuracy": _summary(62.0, 61.0, 63.0)}})
RTE = {"run": False, "reason": "data not found at /data/glue/RTE/train.tsv"}


def _row(text: str, first_cell: str) -> list[str]:
    rows = [[cell.strip() for cell in line.strip("|").split("|")]
            for line in text.splitlines() if line.startswith("|")]
    (row,) = [r for r in rows if r[0] == first_cell]
    return row


def test_task_row_has_median_spread_seeds_and_the_paper() -> None:
    text = render_summary(PRETRAIN, TASKS, {"sst2": SST2})
    assert _row(text, "SST-2") == ["SST-2", "accuracy", "78.4", "[77.0, 80.2]", "3", "91.3",
                                   "67,349"]


def test_secondary_metrics_and_extra_dev_splits() -> None:
    text = render_summary(PRETRAIN, TASKS, {"mrpc": MRPC, "mnli": MNLI})
    assert _row(text, "MRPC")[1:4] == ["f1 (accuracy 70.0)", "80.0", "[79.0, 81.0]"]
    assert _row(text, "MNLI")[2] == "60.0" and _row(text, "MNLI")[5] == "82.1"
    assert _row(text, "MNLI (dev_mismatched)")[2] == "62.0"
    assert _row(text, "MNLI (dev_mismatched)")[5] == "81.4"


def test_task_not_run_says_why() -> None:
    text = render_summary(PRETRAIN, TASKS, {"rte": RTE, "sst2": SST2})
    assert "| RTE | | | not run: data not found at /data/glue/RTE/train.tsv |" in text


def test_rows_follow_the_registry_and_link_plots() -> None:
    text = render_summary(PRETRAIN, TASKS, {"sst2": SST2, "mrpc": MRPC},
                          plots={"sst2": "plots/sst2.png"})
    assert text.index("[SST-2](plots/sst2.png)") < text.index("| MRPC |")


def test_glue_average_follows_glue() -> None:
    # SST-2 78.44; MRPC mean(80, 70) = 75; MNLI mean(60, 62) = 61; RTE not run
    results = {"sst2": SST2, "mrpc": MRPC, "mnli": MNLI, "rte": RTE}
    assert glue_average(TASKS, results) == pytest.approx((78.44 + 75.0 + 61.0) / 3)
    assert glue_average(TASKS, {"rte": RTE}) is None
    text = render_summary(PRETRAIN, TASKS, results)
    assert "GLUE average over the GLUE tasks run here: 71.5 (paper: 72.8" in text


def test_pretraining_row() -> None:
    text = render_summary(PRETRAIN, TASKS, {"sst2": SST2})
    assert _row(text, "400") == ["400", "1,638,400", "5,432,100", "4.5679", "4.9877", "146.62",
                                 "6.5432", "12,346", "12.3%"]
    assert text.startswith("# gpt1 benchmark report\n")
    assert "Radford et al. 2018" in text
    assert text.endswith("\n")


def test_markdown_tables_are_well_formed() -> None:
    text = render_summary(PRETRAIN, TASKS, {"sst2": SST2, "mnli": MNLI, "rte": RTE})
    lines = text.splitlines()
    for header in ("| steps |", "| task |"):
        assert any(line.startswith(header) for line in lines), header
    assert_tables_well_formed(lines)


def test_metric_rows_one_per_task_split_and_metric() -> None:
    rows = metric_rows(TASKS, {"sst2": SST2, "mrpc": MRPC, "mnli": MNLI, "rte": RTE})
    assert [(r["task"], r["split"], r["metric"]) for r in rows] == [
        ("sst2", "dev", "accuracy"), ("mnli", "dev", "accuracy"),
        ("mnli", "dev_mismatched", "accuracy"), ("rte", None, None),
        ("mrpc", "dev", "f1"), ("mrpc", "dev", "accuracy")]
    assert rows[0] == {"task": "sst2", "split": "dev", "metric": "accuracy", "median": 78.44,
                       "min": 77.0, "max": 80.15, "seeds": 3, "paper": 91.3, "note": ""}
    assert rows[2]["paper"] == 81.4 and rows[5]["paper"] is None  # the paper's figure is F1
    assert rows[3]["note"] == "not run: data not found at /data/glue/RTE/train.tsv"


def test_held_out_text_sits_beside_the_val_loss_and_the_unigram_baseline() -> None:
    book = {"tokens": 123_456, "words": 98_765, "loss": 3.21, "perplexity": 24.78,
            "word_loss": 4.012, "word_perplexity": 55.27, "unigram_loss": 6.5}
    lm_eval = {"run": True, "files": {"books/kept.txt": book}, "all": book, "val_loss": 3.1,
               "unigram_val_loss": 6.4}
    text = render_summary(PRETRAIN, TASKS, {"sst2": SST2}, lm_eval=lm_eval)
    assert _row(text, "books/kept.txt") == ["books/kept.txt", "123,456", "98,765", "3.2100",
                                            "24.78", "4.0120", "55.27", "6.5000"]
    assert "validation loss 3.1000 (unigram 6.4000)" in text
    assert text.index("## Held-out text") < text.index("## Fine-tuning")
    skipped = render_summary(PRETRAIN, TASKS, {"sst2": SST2},
                             lm_eval={"run": False, "reason": "no held-out text named"})
    assert "Not scored: no held-out text named." in skipped


def test_an_imported_model_says_where_it_came_from() -> None:
    imported = {"run": True, "source": "openai", "source_dir": "../release/model",
                "model_type": "gpt1", "parameters": 116_537_856, "vocab_size": 40_482,
                "n_ctx": 512, "n_embd": 768, "n_layer": 12, "n_head": 12, "seconds": 7.8}
    book = {"tokens": 1_000, "words": 800, "loss": 3.5, "perplexity": 33.12, "word_loss": 4.4,
            "word_perplexity": 81.45, "unigram_loss": None}
    lm_eval = {"run": True, "files": {"books/kept.txt": book}, "all": book, "val_loss": None,
               "unigram_val_loss": None}
    text = render_summary(imported, TASKS, {"sst2": SST2}, lm_eval=lm_eval)
    assert "## Pretraining" not in text and "## Pretrained model" in text
    assert ("Imported from OpenAI's released GPT-1 in `../release/model` (pretrain.source "
            "openai), not pretrained here: 12 layers x 768, 12 heads, n_ctx 512, 40,482 tokens"
            ) in text
    assert _row(text, "books/kept.txt")[-1] == "n/a"
    assert "no validation loss or unigram baseline: the model was imported" in text
    assert_tables_well_formed(text.splitlines())


def test_further_sections_follow_the_task_figures() -> None:
    sections = ["## Ablations (Table 5)", "", "Nothing ran: no data.", ""]
    text = render_summary(PRETRAIN, TASKS, {"sst2": SST2}, sections=sections)
    assert text.index("## Fine-tuning") < text.index("Radford et al. 2018, Tables 2-4") \
        < text.index("## Ablations (Table 5)")
    assert text.endswith("\n\n## Ablations (Table 5)\n\nNothing ran: no data.\n")
