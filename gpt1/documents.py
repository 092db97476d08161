"""Read the document tables (Parquet: id, source, text) that the corpus stages pass along."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq


def iter_text_batches(corpus_dir: Path, batch_docs: int = 256) -> Iterator[list[str]]:
    """Stream the `text` column of every Parquet file in `corpus_dir`, in order, in lists of at
    most `batch_docs` documents."""
    files = sorted(corpus_dir.glob("*.parquet"))
    if not files:
        raise FileNotFoundError(f"{corpus_dir}: no Parquet files (run the stage before)")
    for path in files:
        for batch in pq.ParquetFile(path).iter_batches(batch_size=batch_docs, columns=["text"]):
            yield batch.column(0).to_pylist()


def iter_texts(corpus_dir: Path, batch_docs: int = 256) -> Iterator[str]:
    """Stream the `text` column of every Parquet file in `corpus_dir`, in order."""
    for batch in iter_text_batches(corpus_dir, batch_docs):
        yield from batch
