"""A smoke run of bench.tokenizer at --tiny sizes (the bundled sample, OpenAI's released BPE from
../shared/data): the JSON it writes, not its timings."""

from __future__ import annotations

import json
from pathlib import Path

from bench import tokenizer


def test_tokenizer_tiny(tmp_path: Path, shared_data: Path) -> None:
    path = tokenizer.main(["--tiny", "--repeats", "1", "--out", str(tmp_path),
                           "--release", str(shared_data / "openai-gpt1")])
    assert path == tmp_path / "tokenizer.json"
    result = json.loads(path.read_text())
    assert result["settings"]["tiny"] is True
    (table,) = result["tables"]
    rows = table["rows"]
    assert [row["path"] for row in rows] == ["original TextEncoder", "ours"]
    assert all(row["MB_per_s"] > 0 and row["seconds"] > 0 and row["speedup"] > 0
               for row in rows)
    assert [row["ids_identical"] for row in rows] == [None, True]
    documents = result["settings"]["documents"]
    assert documents > 0 and result["settings"]["identical_documents"] == documents
