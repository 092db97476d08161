"""gpt1.tokenize_corpus: the word-cached encoder gives the tokenizer's own ids; shards in order."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from gpt1.bpe import Gpt1Tokenizer, train_bpe
from gpt1.shards import read_split
from gpt1.tokenize_corpus import WordCachedEncoder, tokenize_corpus

TEXTS = ["the cat sat on the mat .", "The CAT , the dog ; a bird", "zebra quagga xylophone",
         "", " lead  double\x1cspace trail ",
         "x<start>y <pad> \u03a3\u0391\u03a3 \u0130x caf\u00e9"]


def _tokenizer() -> Gpt1Tokenizer:
    return Gpt1Tokenizer(train_bpe(TEXTS[:3] * 5, vocab_size=60, min_frequency=1))


def test_word_cache_gives_the_tokenizers_ids() -> None:
    tokenizer = _tokenizer()
    encoder = WordCachedEncoder(tokenizer, np.dtype(np.uint16))
    for _ in range(2):  # cold, then from the cache
        got = encoder.encode_batch(TEXTS)
        assert [ids.tolist() for ids in got] == tokenizer.encode_batch(TEXTS)


def test_word_cache_past_its_bound_starts_again(monkeypatch) -> None:
    monkeypatch.setattr("gpt1.tokenize_corpus.MAX_CACHED_WORDS", 8)
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
    splits = tokenize_corpus(corpus, tokenizer, tmp_path / "shards", val_every=4, shard_tokens=7)
    assert {k: s.documents for k, s in splits.items()} == {"train": 13, "val": 5}
    for split, keep in (("val", lambda i: i % 4 == 0), ("train", lambda i: i % 4 != 0)):
        want = [t for i, ids in enumerate(tokenizer.encode_batch(texts)) if keep(i) for t in ids]
        assert np.concatenate(read_split(tmp_path / "shards" / split)).tolist() == want
        assert splits[split].tokens == len(want)
