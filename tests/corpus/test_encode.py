"""gpt1.corpus.encode: the word-cached encoder gives the tokenizer's own ids; shards in order; a
lopsided split is named with its numbers. (Stage tokenize's job, gpt1.jobs.tokenize:
tests/jobs/test_tokenize.py; the stage's warning: tests/tasks/test_tokenize.py.)"""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from gpt1.config import ExecutorParams
from gpt1.corpus.encode import (
    SplitShards,
    WordCachedEncoder,
    lopsided_split,
    tokenize_corpus,
)
from gpt1.corpus.shards import ShardInfo, read_split
from tests.corpus_texts import TEXTS, tiny_tokenizer


def test_word_cache_gives_the_tokenizers_ids() -> None:
    tokenizer = tiny_tokenizer()
    encoder = WordCachedEncoder(tokenizer, np.dtype(np.uint16))
    for _ in range(2):  # cold, then from the cache
        got = encoder.encode_batch(TEXTS)
        assert [ids.tolist() for ids in got] == tokenizer.encode_batch(TEXTS)


def test_word_cache_past_its_bound_starts_again(monkeypatch) -> None:
    monkeypatch.setattr("gpt1.corpus.encode.MAX_CACHED_WORDS", 8)
    tokenizer = tiny_tokenizer()
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
    tokenizer = tiny_tokenizer()
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
