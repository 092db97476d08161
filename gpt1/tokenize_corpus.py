"""Encode a clean corpus into train/val shards of token ids, streaming in bounded memory."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path

import numpy as np
from tokenizers import normalizers, pre_tokenizers

from gpt1.bpe import Gpt1Tokenizer
from gpt1.documents import iter_text_batches
from gpt1.shards import ShardInfo, ShardWriter, token_dtype

SPLITS = ("train", "val")
# Documents per `encode_batch` call: enough for the tokenizers' threads to share out, few enough
# that a batch of 20,000-character documents stays a few MB.
ENCODE_BATCH = 256


# Cached word encodings are dropped past this many distinct words, bounding memory.
MAX_CACHED_WORDS = 1 << 20


class WordCachedEncoder:
    """`tokenizer.encode_batch` for a corpus, encoding each distinct space-separated word once.

    Exact, not an approximation: GPT-1's BPE lower-cases character by character, splits at
    whitespace and encodes each piece on its own (its special tokens hold no space), so a text's
    ids are its words' ids one after the other. A word holding other whitespace is simply split
    again by the tokenizer. Books repeat their words, so most words are a dictionary lookup.
    """

    def __init__(self, tokenizer: Gpt1Tokenizer, dtype: np.dtype) -> None:
        backend = tokenizer.backend
        if not (isinstance(backend.pre_tokenizer, pre_tokenizers.WhitespaceSplit)
                and isinstance(backend.normalizer, normalizers.Lowercase | None)
                and backend.post_processor is None):
            raise ValueError("WordCachedEncoder needs GPT-1's BPE: lower-case, whitespace split")
        self.tokenizer, self.dtype = tokenizer, dtype
        self._cache: dict[str, list[int]] = {}

    def encode_batch(self, texts: list[str]) -> list[np.ndarray]:
        words = [text.split(" ") for text in texts]
        new = list(set(chain.from_iterable(words)).difference(self._cache))
        if len(self._cache) + len(new) > MAX_CACHED_WORDS:
            self._cache.clear()
            new = list(set(chain.from_iterable(words)))
        self._cache.update(zip(new, self.tokenizer.encode_batch(new), strict=True))
        lookup = self._cache.__getitem__
        return [np.fromiter(chain.from_iterable(map(lookup, ws)), dtype=self.dtype)
                for ws in words]


@dataclass
class SplitShards:
    documents: int = 0
    shards: list[ShardInfo] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        return sum(s.tokens for s in self.shards)


def tokenize_corpus(corpus_dir: Path, tokenizer: Gpt1Tokenizer, out_dir: Path, *,
                    val_every: int, shard_tokens: int) -> dict[str, SplitShards]:
    """Encode every document of the Parquet files in `corpus_dir`, in order, into
    `out_dir/{train,val}/NNNNN.arrow`; every `val_every`-th document (the first of each
    `val_every`) goes to val. Memory holds one batch of documents and one shard at most."""
    dtype = token_dtype(tokenizer.vocab_size)
    splits = {split: SplitShards() for split in SPLITS}
    writers = {split: ShardWriter(out_dir / split, dtype, shard_tokens) for split in SPLITS}
    encoder = WordCachedEncoder(tokenizer, dtype)
    doc_index = 0
    for batch in iter_text_batches(corpus_dir, ENCODE_BATCH):
        for ids in encoder.encode_batch(batch):
            split = "val" if doc_index % val_every == 0 else "train"
            writers[split].append(ids)
            splits[split].documents += 1
            doc_index += 1
    for split, writer in writers.items():
        splits[split].shards = writer.close()
    return splits
