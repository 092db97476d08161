"""gpt1.corpus.encode: the word-cached encoder gives the tokenizer's own ids; shards in order."""

from __future__ import annotations

import hashlib
import json
import logging
import os
from itertools import pairwise
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpt1.config import ExecutorParams, TokenizeParams, load_params
from gpt1.corpus.encode import (
    SplitShards,
    WordCachedEncoder,
    lopsided_split,
    tokenize_corpus,
)
from gpt1.corpus.shards import ShardInfo, read_split
from gpt1.corpus.tokenizer import GPT1Tokenizer, train_bpe
from gpt1.errors import InputError
from gpt1.jobs.tokenize import write_shards
from tasks import tokenize
from tasks.paths import BPE_DIR, CLEAN_DIR
from tests.conftest import REPO

TEXTS = ["the cat sat on the mat .", "The CAT , the dog ; a bird", "zebra quagga xylophone",
         "", " lead  double\x1cspace trail ",
         "x<start>y <pad> \u03a3\u0391\u03a3 \u0130x caf\u00e9"]


def _tokenizer() -> GPT1Tokenizer:
    return GPT1Tokenizer(train_bpe(TEXTS[:3] * 5, vocab_size=60, min_frequency=1))


def test_word_cache_gives_the_tokenizers_ids() -> None:
    tokenizer = _tokenizer()
    encoder = WordCachedEncoder(tokenizer, np.dtype(np.uint16))
    for _ in range(2):  # cold, then from the cache
        got = encoder.encode_batch(TEXTS)
        assert [ids.tolist() for ids in got] == tokenizer.encode_batch(TEXTS)


def test_word_cache_past_its_bound_starts_again(monkeypatch) -> None:
    monkeypatch.setattr("gpt1.corpus.encode.MAX_CACHED_WORDS", 8)
    tokenizer = _tokenizer()
    encoder = WordCachedEncoder(tokenizer, np.dtype(np.uint16))
    sizes, batch_words = [], []
    for i in range(len(TEXTS)):
        batch = pa.array(TEXTS[i:i + 2])
        got = encoder.encode_batch(batch)
        assert [ids.tolist() for ids in got] == tokenizer.encode_batch(batch.to_pylist())
        sizes.append(len(encoder._words))
        batch_words.append(len({w for t in TEXTS[i:i + 2] for w in t.split(" ")}))
    # the cache started again at least once, and never held more than the bound but for the
    # words of one batch, which it must hold
    assert any(b < a for a, b in pairwise(sizes))
    assert max(sizes) <= max(8, *batch_words)


def test_tokenize_corpus_splits_in_order(tmp_path: Path) -> None:
    tokenizer = _tokenizer()
    corpus = tmp_path / "clean"
    corpus.mkdir()
    texts = TEXTS * 3
    pq.write_table(pa.table({"text": texts}), corpus / "corpus.parquet")
    splits = tokenize_corpus(corpus, tokenizer, tmp_path / "shards", val_every=4, shard_tokens=7,
                             executor=ExecutorParams(workers=1))
    assert {k: s.documents for k, s in splits.items()} == {"train": 13, "val": 5}
    for split, keep in (("val", lambda i: i % 4 == 0), ("train", lambda i: i % 4 != 0)):
        want = [t for i, ids in enumerate(tokenizer.encode_batch(texts)) if keep(i) for t in ids]
        assert np.concatenate(read_split(tmp_path / "shards" / split)).tolist() == want
        assert splits[split].tokens == len(want)


def _splits(train: tuple[int, int], val: tuple[int, int]) -> dict[str, SplitShards]:
    """(documents, tokens) per split, the tokens in one shard."""
    return {split: SplitShards(documents, [ShardInfo("00000.arrow", tokens, "")])
            for split, (documents, tokens) in (("train", train), ("val", val))}


def test_val_share_near_one_in_val_every_is_not_lopsided() -> None:
    assert lopsided_split(_splits((19, 950), (1, 50)), val_every=20) is None
    # the bounds: 2x and half the expected share of 1/20
    assert lopsided_split(_splits((18, 900), (2, 100)), val_every=20) is None
    assert lopsided_split(_splits((39, 975), (1, 25)), val_every=20) is None


def test_lopsided_split_is_named_with_its_numbers() -> None:
    # one huge document landed in val (the first document always does)
    assert lopsided_split(_splits((1, 9_000), (1, 1_000_000)), val_every=20) == (
        "lopsided split: val holds 1,000,000 of 1,009,000 tokens (99.1%), 19.82x the 1/20 of "
        "tokenize.val_every, in 1 of 2 documents: too few documents, or some far longer than "
        "the rest")
    # ... or in train
    warning = lopsided_split(_splits((19, 1_000_000), (1, 24)), val_every=20)
    assert warning is not None and "val holds 24 of 1,000,024 tokens (0.0%), 0.00x" in warning
    # just past the bounds: 2.01x and 0.49x the expected share of 1/10
    assert "2.01x the 1/10" in str(lopsided_split(_splits((9, 799), (1, 201)), val_every=10))
    assert "0.49x the 1/10" in str(lopsided_split(_splits((9, 951), (1, 49)), val_every=10))


def test_tokenize_stage_warns_of_a_lopsided_split(tmp_path: Path, monkeypatch,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.chdir(tmp_path)
    for folder in (CLEAN_DIR, BPE_DIR):
        folder.mkdir(parents=True)
    # the first document, which goes to val, holds nearly all the text
    texts = ["the cat sat on the mat . " * 200, *["a bird ."] * 30]
    pq.write_table(pa.table({"text": texts}), CLEAN_DIR / "00000.parquet")
    _tokenizer().backend.save(str(BPE_DIR / "tokenizer.json"))
    params = load_params(REPO / "params.yaml")
    with caplog.at_level(logging.INFO, logger="gpt1.tokenize"):
        tokenize.run(params)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and warnings[0].startswith("lopsided split: val holds "), warnings
    assert f"in 2 of {len(texts)} documents" in warnings[0]  # documents 0 and 20 (val_every 20)


def _corpus(tmp_path: Path, texts: list[str]) -> tuple[Path, Path]:
    corpus = tmp_path / "clean"
    corpus.mkdir()
    pq.write_table(pa.table({"text": texts}), corpus / "corpus.parquet")
    tokenizer_path = tmp_path / "tokenizer.json"
    _tokenizer().backend.save(str(tokenizer_path))
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
    tokenizer = _tokenizer()
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
