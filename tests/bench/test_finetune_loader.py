"""Smoke runs of `bench.finetune` and `bench.loader` at --tiny sizes on the bundled data: they run
end to end and write their JSON. No timing is asserted: the figures depend on the machine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import finetune, loader

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _tables(path: Path, name: str) -> list[dict]:
    result = json.loads(path.read_text())
    assert path.name == f"{name}.json" and result["benchmark"] == name
    assert result["settings"]["tiny"] and result["settings"]["repeats"] == 2
    return result["tables"]


def test_finetune_tiny(tmp_path: Path) -> None:
    rates, quality = _tables(finetune.main(["--tiny", "--repeats", "2", "--out", str(tmp_path)]),
                             "finetune")
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


def test_loader_tiny(tmp_path: Path) -> None:
    (table,) = _tables(loader.main(["--tiny", "--repeats", "2", "--out", str(tmp_path)]),
                       "loader")
    (row,) = table["rows"]
    assert row["loader_batches"] > 0 and row["model_steps"] > 0
    assert row["ratio"] == pytest.approx(row["loader_batches"] / row["model_steps"])
