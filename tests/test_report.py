"""gpt1.report: the summary puts our figures beside the paper's."""

from __future__ import annotations

from gpt1.registry import TASKS
from gpt1.report import render_summary

PRETRAIN = {"steps": 400, "tokens": 1_638_400, "parameters": 5_432_100, "train_loss": 4.56789,
            "val_loss": 4.98765, "val_perplexity": 146.62, "unigram_val_loss": 6.54321,
            "tokens_per_second": 12345.6}
SST2 = {"task": "sst2", "metric": "accuracy", "dev": {"accuracy": 78.44},
        "train_examples": 67349, "dev_examples": 872}


def _row(text: str, first_cell: str) -> list[str]:
    (line,) = [line for line in text.splitlines() if line.startswith(f"| {first_cell} ")]
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_sst2_row_has_ours_and_the_paper() -> None:
    text = render_summary(PRETRAIN, {"sst2": SST2})
    assert _row(text, "SST-2") == ["SST-2", "accuracy", "78.4", "91.3", "67,349", "872"]
    assert "91.3" in text and "78.4" in text


def test_pretraining_row() -> None:
    text = render_summary(PRETRAIN, {"sst2": SST2})
    assert _row(text, "400") == ["400", "1,638,400", "5,432,100", "4.5679", "4.9877", "146.62",
                                 "6.5432", "12,346"]
    assert text.startswith("# gpt1 benchmark report\n")
    assert "Radford et al. (2018)" in text
    assert text.endswith("\n")


def test_markdown_tables_are_well_formed() -> None:
    text = render_summary(PRETRAIN, {"sst2": SST2})
    lines = text.splitlines()
    for header in ("| steps |", "| task |"):
        i = next(k for k, line in enumerate(lines) if line.startswith(header))
        width = lines[i].count("|")
        assert lines[i + 1].count("|") == width and set(lines[i + 1]) <= set("|-:")
        assert lines[i + 2].count("|") == width


def test_no_tasks_gives_an_empty_table() -> None:
    text = render_summary(PRETRAIN, {})
    assert "| task | metric | ours | paper |" in text
    assert "SST-2" not in text and "91.3" not in text


def test_tasks_appear_in_registry_order_with_their_metric() -> None:
    finetune = {name: {"dev": {spec.metric: 10.0 + i}, "train_examples": 100 + i,
                       "dev_examples": 10 + i}
                for i, (name, spec) in enumerate(TASKS.items())}
    text = render_summary(PRETRAIN, dict(reversed(finetune.items())))
    rows = [line for line in text.splitlines()
            if any(line.startswith(f"| {spec.title} |") for spec in TASKS.values())]
    assert len(rows) == len(TASKS)
    for i, (row, spec) in enumerate(zip(rows, TASKS.values(), strict=True)):
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[:4] == [spec.title, spec.metric, f"{10.0 + i:.1f}", f"{spec.paper_score:.1f}"]
