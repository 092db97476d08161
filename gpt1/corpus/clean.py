"""Clean a corpus of documents in bounded memory on all cores, recording what was dropped."""

from __future__ import annotations

import hashlib
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from gpt1.config import ExecutorParams
from gpt1.corpus.documents import DOCUMENT_SCHEMA
from gpt1.corpus.parallel import executor_map
from gpt1.corpus.text import TextCleaner

_cleaner = TextCleaner()


@dataclass
class CleanStats:
    docs_in: int = 0
    docs_out: int = 0
    chars_in: int = 0
    chars_out: int = 0
    dropped: Counter[str] = field(default_factory=Counter)

    def as_dict(self) -> dict:
        d = asdict(self)
        d["dropped"] = {reason: self.dropped[reason] for reason in ("empty", "too_short",
                                                                      "duplicate")}
        return d


def _init_worker() -> None:
    """Clean's workers need spaCy's tokenizer alone, yet spaCy imports thinc, which imports torch
    when it is installed: seconds of start-up per worker. Unless the process already loaded torch
    (spawning re-imports the main module), it is marked missing, which thinc handles."""
    sys.modules.setdefault("torch", None)


def _clean_batch(batch: dict[str, list]) -> dict[str, list]:
    return {**batch, "chars_in": [len(t) for t in batch["text"]],
            "text": [_cleaner(text) for text in batch["text"]]}


def _batches(inputs: list[Path], batch_docs: int) -> Iterator[dict[str, list[str]]]:
    for path in inputs:
        for record_batch in pq.ParquetFile(path).iter_batches(batch_size=batch_docs,
                                                              columns=["id", "source", "text"]):
            yield record_batch.to_pydict()


def clean_corpus(inputs: list[Path], out: Path, *, executor: ExecutorParams, batch_docs: int,
                 min_chars: int, dedupe: bool,
                 on_progress: Callable[[int], None] | None = None) -> CleanStats:
    """Clean every document of the Parquet `inputs` into the Parquet file `out`, in input order
    (the same bytes whatever `executor` runs the batches); `on_progress(documents_done)` is
    called after each batch."""
    stats = CleanStats()
    seen: set[bytes] = set()
    with pq.ParquetWriter(out, DOCUMENT_SCHEMA) as writer:
        for batch in executor_map(_clean_batch, _batches(inputs, batch_docs), executor,
                                  worker_setup=_init_worker):
            keep: dict[str, list[str]] = {"id": [], "source": [], "text": []}
            for doc_id, source, chars_in, text in zip(batch["id"], batch["source"],
                                                      batch["chars_in"], batch["text"],
                                                      strict=True):
                stats.docs_in += 1
                stats.chars_in += chars_in
                reason = _drop_reason(text, min_chars, seen if dedupe else None)
                if reason:
                    stats.dropped[reason] += 1
                    continue
                keep["id"].append(doc_id)
                keep["source"].append(source)
                keep["text"].append(text)
                stats.docs_out += 1
                stats.chars_out += len(text)
            if keep["id"]:
                writer.write_table(pa.table(keep, schema=DOCUMENT_SCHEMA))
            if on_progress is not None:
                on_progress(stats.docs_in)
    return stats


def _drop_reason(text: str, min_chars: int, seen: set[bytes] | None) -> str | None:
    if not text:
        return "empty"
    if len(text) < min_chars:
        return "too_short"
    if seen is not None:
        digest = hashlib.blake2b(text.encode(), digest_size=16).digest()
        if digest in seen:
            return "duplicate"
        seen.add(digest)
    return None
