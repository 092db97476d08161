"""A smoke run of `bench.finetune` at --tiny sizes on the bundled data: it runs end to end and
writes its JSON. No timing is asserted: the figures depend on the machine."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import finetune
from tests.bench.tiny_results import tiny_tables

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_finetune_tiny(tmp_path: Path) -> None:
    rates, quality = tiny_tables(
        finetune.main(["--tiny", "--repeats", "2", "--out", str(tmp_path)]), "finetune")
    assert [row["phase"] for row in rates["rows"]] == ["train", "eval"]
    for row in rates["rows"]:
        assert row["ours"] > 0 and row["baseline"] > 0
        assert row["ratio"] == pytest.approx(row["ours"] / row["baseline"])
    assert [row["side"] for row in quality["rows"]] == ["ours", "baseline"]
    for row in quality["rows"]:
        assert 0 <= row["accuracy"] <= 100 and 0 < row["real_tokens"] <= 1
    ours, baseline = (row["real_tokens"] for row in quality["rows"])
    assert ours > baseline  # bucketed batches carry less padding
    assert any("randomly initialised" in note for note in quality["notes"])
    assert any("same predictions" in note for note in quality["notes"])
