"""Smoke runs of bench.preprocess, bench.memory and bench.corpus at --tiny sizes on the bundled
sample: the JSON they write, not their timings."""

from __future__ import annotations

import json
from pathlib import Path

from bench import corpus, memory, preprocess


def _table(path: Path) -> tuple[dict, dict]:
    result = json.loads(path.read_text())
    (table,) = result["tables"]
    return result, table


def test_preprocess_tiny(tmp_path: Path) -> None:
    path = preprocess.main(["--tiny", "--out", str(tmp_path)])
    result, table = _table(path)
    assert path == tmp_path / "preprocess.json"
    assert result["settings"]["tiny"] is True
    rows = table["rows"]
    assert [row["path"].split(" (")[0].strip() for row in rows] == [
        "reference", "ours", "ours: clean", "ours: tokenize"]
    assert all(row["MB_per_s"] > 0 and row["seconds"] > 0 for row in rows)
    assert rows[1]["speedup"] > 0
    documents = result["settings"]["documents"]
    assert documents > 0 and result["settings"]["identical_documents"] == documents


def test_memory_tiny(tmp_path: Path) -> None:
    path = memory.main(["--tiny", "--out", str(tmp_path)])
    assert path is not None
    result, table = _table(path)
    assert [row["step"] for row in table["rows"]] == ["clean", "tokenize"]
    for row in table["rows"]:
        assert row["1x_MB"] > 0 and row["10x_MB"] > 0 and row["1x_main_MB"] > 0
        assert row["growth"] == row["10x_MB"] / row["1x_MB"]
    assert result["settings"]["copies"] == 10 and result["settings"]["dedupe"] is False


def test_corpus_tiny(tmp_path: Path) -> None:
    path = corpus.main(["--tiny", "--out", str(tmp_path)])
    result = json.loads(path.read_text())
    stages, shards, steps = result["tables"]
    assert [row["stage"] for row in stages["rows"]] == [
        "ingest", "clean", "bpe", "tokenize", "clean (dask)", "tokenize (dask)"]
    for row in stages["rows"]:
        assert row["big_seconds"] > 0 and row["big_peak_MB"] > 0 and row["big_MB"] > 0
    # only a Dask run has a local run to compare with
    assert [row["same_bytes_as_local"] for row in stages["rows"]] == [None] * 4 + [True] * 2
    assert [row["split"] for row in shards["rows"]] == ["train", "val"]
    assert all(row["tokens"] > 0 and row["shards"] >= 1 for row in shards["rows"])
    assert [row["corpus"] for row in steps["rows"]] == ["small", "big"]
    assert all(row["seconds_per_step"] > 0 for row in steps["rows"])
