"""Token ids in Arrow IPC shards: written in bounded memory, read back memory-mapped."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from gpt1.atomic import atomic_file
from gpt1.errors import InputError, MissingInputError

COLUMN = "ids"


def token_dtype(vocab_size: int) -> np.dtype:
    """The narrowest unsigned integer type that holds every id of the vocabulary."""
    return np.dtype(np.uint16) if vocab_size <= 1 << 16 else np.dtype(np.uint32)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass(frozen=True)
class ShardInfo:
    file: str
    tokens: int
    sha256: str


class ShardWriter:
    """Append token ids; every `shard_tokens` ids become one `NNNNN.arrow` file in `out_dir`.

    Ids are copied into one preallocated shard buffer rather than collected and concatenated, so
    memory stays at one shard whatever the corpus size; the buffer's pages only become resident
    as they are filled, so a small corpus does not pay for a whole shard either.
    """

    def __init__(self, out_dir: Path, dtype: np.dtype, shard_tokens: int) -> None:
        self.out_dir, self.dtype, self.shard_tokens = out_dir, dtype, shard_tokens
        self.shards: list[ShardInfo] = []
        self._buffer = np.empty(shard_tokens, dtype=dtype)
        self._filled = 0
        out_dir.mkdir(parents=True, exist_ok=True)

    def append(self, ids: np.ndarray) -> None:
        while len(ids):
            n = min(len(ids), self.shard_tokens - self._filled)
            self._buffer[self._filled:self._filled + n] = ids[:n]
            self._filled += n
            ids = ids[n:]
            if self._filled == self.shard_tokens:
                self._write(self._buffer)
                self._filled = 0

    def close(self) -> list[ShardInfo]:
        if self._filled:
            self._write(self._buffer[:self._filled])
        self._filled = 0
        return self.shards

    def _write(self, ids: np.ndarray) -> None:
        path = self.out_dir / f"{len(self.shards):05d}.arrow"
        batch = pa.record_batch([pa.array(ids)], names=[COLUMN])
        with atomic_file(path) as tmp, pa.OSFile(str(tmp), "wb") as sink, \
                pa.ipc.new_file(sink, batch.schema) as writer:
            writer.write_batch(batch)
        self.shards.append(ShardInfo(path.name, len(ids), sha256_file(path)))


def read_shard(path: Path) -> np.ndarray:
    """The ids of one shard as a read-only NumPy view of the memory-mapped file (no copy)."""
    with pa.ipc.open_file(pa.memory_map(str(path), "r")) as reader:
        if reader.num_record_batches != 1:
            raise InputError(
                f"{path}: expected one record batch, found {reader.num_record_batches}")
        return reader.get_batch(0).column(0).to_numpy(zero_copy_only=True)


def read_split(split_dir: Path) -> list[np.ndarray]:
    """Every shard of a split, memory-mapped, in order."""
    paths = sorted(split_dir.glob("*.arrow"))
    if not paths:
        raise MissingInputError(f"{split_dir}: no .arrow shards (run the tokenize stage first)")
    return [read_shard(p) for p in paths]


def read_verified_split(split_dir: Path, listed: list[dict]) -> list[np.ndarray]:
    """Every shard of a split, memory-mapped, after checking them against the manifest's list
    (`file`, `tokens`, `sha256` each): a shard changed, added or missing since tokenize wrote
    them is an error naming it. Hashing reads each file once, at disk speed: seconds for
    billions of tokens, nothing beside the training it guards."""
    manifest = split_dir.parent / "manifest.json"
    found = sorted(p.name for p in split_dir.glob("*.arrow"))
    expected = [entry["file"] for entry in listed]
    if found != expected:
        extra, missing = sorted(set(found) - set(expected)), sorted(set(expected) - set(found))
        raise InputError(f"{split_dir}: shards differ from {manifest} (not listed: {extra}; "
                         f"missing: {missing}); run the tokenize stage again")
    shards = []
    for entry in listed:
        path = split_dir / entry["file"]
        if sha256_file(path) != entry["sha256"]:
            raise InputError(f"{path}: contents differ from the sha256 in {manifest}; the shard "
                             "was changed after tokenize wrote it: run the tokenize stage again")
        ids = read_shard(path)
        if len(ids) != entry["tokens"]:
            raise InputError(f"{path}: {len(ids)} tokens, {manifest} says {entry['tokens']}")
        shards.append(ids)
    return shards


def token_counts(shards: list[np.ndarray], vocab_size: int) -> np.ndarray:
    """How often each id occurs across `shards` (one pass over the memory-mapped files)."""
    counts = np.zeros(vocab_size, dtype=np.int64)
    for ids in shards:
        counts += np.bincount(ids, minlength=vocab_size)[:vocab_size]
    return counts


def unigram_log_probs(train: list[np.ndarray], vocab_size: int) -> np.ndarray:
    """Each id's log-probability under the train split's add-one-smoothed token frequencies: a
    model that has learned frequencies and nothing of context."""
    return np.log((token_counts(train, vocab_size) + 1.0)
                  / (sum(len(s) for s in train) + vocab_size))


def cross_entropy(log_probs: np.ndarray, tokens: list[np.ndarray]) -> float:
    """Nats per token of `tokens` under the fixed distribution `log_probs` (over the ids)."""
    counts = token_counts(tokens, len(log_probs))
    return float(-(counts @ log_probs) / counts.sum())


def unigram_loss(train: list[np.ndarray], val: list[np.ndarray], vocab_size: int) -> float:
    """Cross-entropy (nats/token) on `val` of the train split's add-one-smoothed token
    frequencies: the loss of a model that has learned frequencies and nothing of context."""
    return cross_entropy(unigram_log_probs(train, vocab_size), val)
