"""gpt1.jobs.tokenize: stage tokenize's job, write_shards, replaces the folder with the shards of
each split and their manifest, or fails on an empty split leaving the folder as it was."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpt1.config import ExecutorParams, TokenizeParams
from gpt1.errors import InputError
from gpt1.jobs.tokenize import write_shards
from tests.corpus_texts import TEXTS, tiny_tokenizer


def _corpus(tmp_path: Path, texts: list[str]) -> tuple[Path, Path]:
    corpus = tmp_path / "clean"
    corpus.mkdir()
    pq.write_table(pa.table({"text": texts}), corpus / "corpus.parquet")
    tokenizer_path = tmp_path / "tokenizer.json"
    tiny_tokenizer().backend.save(str(tokenizer_path))
    return corpus, tokenizer_path


def test_write_shards_replaces_the_folder_with_shards_and_their_manifest(tmp_path: Path) -> None:
    texts = TEXTS * 3
    corpus, tokenizer_path = _corpus(tmp_path, texts)
    out = tmp_path / "shards"
    out.mkdir()
    (out / "stale.arrow").write_bytes(b"old")
    manifest = write_shards(corpus, tokenizer_path, out, TokenizeParams(val_every=4,
                                                                        shard_tokens=7),
                            ExecutorParams(workers=1))
    text = (out / "manifest.json").read_text()
    assert text.startswith('{\n  "dtype": "uint16",\n') and text.endswith("\n}\n")
    assert json.loads(text) == manifest
    assert sorted(os.listdir(out)) == ["manifest.json", "train", "val"]
    tokenizer = tiny_tokenizer()
    ids = tokenizer.encode_batch(texts)
    assert manifest["vocab_size"] == tokenizer.vocab_size
    assert manifest["tokenizer_sha256"] == hashlib.sha256(
        tokenizer_path.read_bytes()).hexdigest()
    for split, keep in (("val", lambda i: i % 4 == 0), ("train", lambda i: i % 4 != 0)):
        listed = manifest["splits"][split]
        assert listed["documents"] == sum(1 for i in range(len(texts)) if keep(i))
        assert listed["tokens"] == sum(len(t) for i, t in enumerate(ids) if keep(i))
        assert [s["file"] for s in listed["shards"]] == sorted(os.listdir(out / split))
        assert sum(s["tokens"] for s in listed["shards"]) == listed["tokens"]


def test_write_shards_with_an_empty_split_fails_leaving_the_folder(tmp_path: Path) -> None:
    corpus, tokenizer_path = _corpus(tmp_path, TEXTS[:1])  # one document: val's
    out = tmp_path / "shards"
    out.mkdir()
    (out / "kept.arrow").write_bytes(b"old")
    with pytest.raises(InputError, match=r"^tokenize: the train split is empty \(\{'train': 0, "
                                         r"'val': 1\} documents\); add text or lower "
                                         r"tokenize.val_every$"):
        write_shards(corpus, tokenizer_path, out, TokenizeParams(val_every=4, shard_tokens=7),
                     ExecutorParams(workers=1))
    assert os.listdir(out) == ["kept.arrow"]
