"""tasks.tokenize: the stage warns of a lopsided split, one where a document far longer than the
rest lands in val."""

from __future__ import annotations

import logging
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpt1.config import load_params
from tasks import tokenize
from tasks.paths import BPE_DIR, CLEAN_DIR
from tests.conftest import REPO
from tests.corpus_texts import tiny_tokenizer


def test_tokenize_stage_warns_of_a_lopsided_split(tmp_path: Path, monkeypatch,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.chdir(tmp_path)
    for folder in (CLEAN_DIR, BPE_DIR):
        folder.mkdir(parents=True)
    # the first document, which goes to val, holds nearly all the text
    texts = ["the cat sat on the mat . " * 200, *["a bird ."] * 30]
    pq.write_table(pa.table({"text": texts}), CLEAN_DIR / "00000.parquet")
    tiny_tokenizer().backend.save(str(BPE_DIR / "tokenizer.json"))
    params = load_params(REPO / "params.yaml")
    with caplog.at_level(logging.INFO, logger="gpt1.tokenize"):
        tokenize.run(params)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and warnings[0].startswith("lopsided split: val holds "), warnings
    assert f"in 2 of {len(texts)} documents" in warnings[0]  # documents 0 and 20 (val_every 20)
