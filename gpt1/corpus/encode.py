"""Encode a clean corpus into train/val shards of token ids, streaming in bounded memory."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tokenizers import Tokenizer, normalizers

from gpt1.config import ExecutorParams
from gpt1.corpus.documents import iter_text_arrays
from gpt1.corpus.parallel import executor_map
from gpt1.corpus.shards import ShardInfo, ShardWriter, token_dtype
from gpt1.corpus.tokenizer import GPT1Tokenizer

SPLITS = ("train", "val")
# Documents per `encode_batch` call: enough for the tokenizers' threads to share out, few enough
# that a batch of 20,000-character documents stays a few MB.
ENCODE_BATCH = 256


# Cached word encodings are dropped past this many distinct words, bounding memory.
MAX_CACHED_WORDS = 1 << 20


# The pre-tokenizers of GPT-1's BPE, serialised: ours split at any whitespace, the one of
# OpenAI's release (gpt1.interop.openai) at spaces alone, so that a newline stays a word.
_WORD_SPLITS = ({"type": "WhitespaceSplit"},
                {"type": "Split", "pattern": {"String": " "}, "behavior": "Removed",
                 "invert": False})


class WordCachedEncoder:
    """`tokenizer.encode_batch` for a corpus, encoding each distinct space-separated word once.

    Exact, not an approximation: GPT-1's BPE lower-cases character by character, splits at
    whitespace (or at spaces alone) and encodes each piece on its own (its special tokens hold no
    space), so a text's ids are its words' ids one after the other. A word holding other
    whitespace is simply split again by a tokenizer that splits there. Books repeat their words,
    so most words are a hash lookup.
    """

    def __init__(self, tokenizer: GPT1Tokenizer, dtype: np.dtype) -> None:
        backend = tokenizer.backend
        split = backend.pre_tokenizer and json.loads(backend.pre_tokenizer.__getstate__())
        if not (split in _WORD_SPLITS
                and isinstance(backend.normalizer, normalizers.Lowercase | None)
                and backend.post_processor is None):
            raise ValueError("WordCachedEncoder needs GPT-1's BPE: lower-case, whitespace split")
        self.tokenizer, self.dtype = tokenizer, dtype
        self._clear()

    def _clear(self) -> None:
        # word n of _words has the ids _ids[_starts[n]:_starts[n] + _lengths[n]]
        self._words = pa.array([], pa.string())
        self._ids = np.zeros(0, self.dtype)
        self._starts = np.zeros(0, np.int64)
        self._lengths = np.zeros(0, np.int64)

    def _add(self, words: pa.StringArray) -> None:
        encoded = self.tokenizer.encode_batch(words.to_pylist())
        lengths = np.fromiter(map(len, encoded), np.int64, len(encoded))
        self._words = pa.concat_arrays([self._words, words])
        self._starts = np.concatenate([self._starts, len(self._ids) + np.cumsum(lengths) - lengths])
        self._lengths = np.concatenate([self._lengths, lengths])
        self._ids = np.concatenate([self._ids, np.fromiter(chain.from_iterable(encoded),
                                                           self.dtype, int(lengths.sum()))])

    def encode_batch(self, texts: pa.StringArray | list[str]) -> list[np.ndarray]:
        """Each text's ids. Splitting, word lookup and the gather of ids run in Arrow and numpy:
        no Python work per word or per token, but for words never seen before."""
        words = pc.split_pattern(texts, " ")
        flat = pc.list_flatten(words)
        numbers = pc.index_in(flat, value_set=self._words)
        if numbers.null_count:
            new = pc.unique(flat.filter(numbers.is_null()))
            if len(self._words) + len(new) > MAX_CACHED_WORDS:
                self._clear()
                new = pc.unique(flat)
            self._add(new)
            numbers = pc.index_in(flat, value_set=self._words)
        numbers = numbers.to_numpy()
        lengths = self._lengths[numbers]
        ends = np.cumsum(lengths)
        positions = np.arange(ends[-1] if len(ends) else 0) + np.repeat(
            self._starts[numbers] - (ends - lengths), lengths)
        doc_ends = ends[np.cumsum(pc.list_value_length(words).to_numpy()) - 1]
        return np.split(self._ids[positions], doc_ends[:-1])


@dataclass
class SplitShards:
    documents: int = 0
    shards: list[ShardInfo] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        return sum(s.tokens for s in self.shards)


# Every val_every-th document goes to val, so val holds about 1/val_every of the tokens where
# documents are many and of about one size, as ingest.doc_chars makes them (about 0.85x that
# share on the bundled sample, 1.02x on the real books). Off by more than this factor either
# way, there are too few documents or some dwarf the rest: val then measures a sliver of the
# corpus, or train loses much of it.
VAL_SHARE_TOLERANCE = 2.0


def lopsided_split(splits: dict[str, SplitShards], val_every: int) -> str | None:
    """A warning where val's share of the tokens is off 1/`val_every` by more than
    VAL_SHARE_TOLERANCE times either way; None where it is not. The splits hold tokens."""
    total = sum(s.tokens for s in splits.values())
    val = splits["val"].tokens
    ratio = val / total * val_every
    if 1 / VAL_SHARE_TOLERANCE <= ratio <= VAL_SHARE_TOLERANCE:
        return None
    documents = sum(s.documents for s in splits.values())
    return (f"lopsided split: val holds {val:,} of {total:,} tokens ({val / total:.1%}), "
            f"{ratio:.2f}x the 1/{val_every} of tokenize.val_every, in {splits['val'].documents} "
            f"of {documents} documents: too few documents, or some far longer than the rest")


@functools.lru_cache(maxsize=1)
def _encoder(tokenizer_json: str) -> WordCachedEncoder:
    """A worker's encoder, built at its first batch and kept, word cache and all, for the rest."""
    tokenizer = GPT1Tokenizer(Tokenizer.from_str(tokenizer_json))
    return WordCachedEncoder(tokenizer, token_dtype(tokenizer.vocab_size))


def _encode_batch(tokenizer_json: str, texts: pa.StringArray) -> list[np.ndarray]:
    return _encoder(tokenizer_json).encode_batch(texts)


def _compact(batches: Iterator[pa.StringArray]) -> Iterator[pa.StringArray]:
    """Each batch in buffers of its own: a slice pickles the whole buffer it was cut from."""
    for batch in batches:
        yield pa.concat_arrays([batch])


def tokenize_corpus(corpus_dir: Path, tokenizer: GPT1Tokenizer, out_dir: Path, *,
                    val_every: int, shard_tokens: int,
                    executor: ExecutorParams) -> dict[str, SplitShards]:
    """Encode every document of the Parquet files in `corpus_dir`, in order, into
    `out_dir/{train,val}/NNNNN.arrow`; every `val_every`-th document (the first of each
    `val_every`) goes to val. The batches are encoded where `executor` says, the shards written
    here, the same bytes either way. Memory holds a few batches of documents and one shard."""
    dtype = token_dtype(tokenizer.vocab_size)
    splits = {split: SplitShards() for split in SPLITS}
    writers = {split: ShardWriter(out_dir / split, dtype, shard_tokens) for split in SPLITS}
    encode = functools.partial(_encode_batch, tokenizer.backend.to_str())
    doc_index = 0
    batches = _compact(iter_text_arrays(corpus_dir, ENCODE_BATCH))
    for encoded in executor_map(encode, batches, executor):
        for ids in encoded:
            split = "val" if doc_index % val_every == 0 else "train"
            writers[split].append(ids)
            splits[split].documents += 1
            doc_index += 1
    for split, writer in writers.items():
        splits[split].shards = writer.close()
    return splits
