"""The document tables (Parquet: id, source, text) that the corpus stages pass along."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from gpt1.errors import MissingInputError

# one row per document: its id, the book (file) it came from, and its text
DOCUMENT_SCHEMA = pa.schema([("id", pa.string()), ("source", pa.string()), ("text", pa.string())])


def iter_text_arrays(corpus_dir: Path, batch_docs: int = 256) -> Iterator[pa.StringArray]:
    """Stream the `text` column of every Parquet file in `corpus_dir`, in order, in Arrow arrays
    of at most `batch_docs` documents.

    Files are read a row group at a time (as large as their writer made them: clean writes a
    few documents per group): `iter_batches` over a whole file holds memory that grows with the
    file. Measured: bench/results/findings.md ("Document tables: a row group at a time against
    iter_batches").
    """
    files = sorted(corpus_dir.glob("*.parquet"))
    if not files:
        raise MissingInputError(f"{corpus_dir}: no Parquet files (run the stage before)")
    pending: list[pa.StringArray] = []
    count = 0
    for path in files:
        parquet = pq.ParquetFile(path)
        for group in range(parquet.num_row_groups):
            chunks = parquet.read_row_group(group, columns=["text"]).column(0).chunks
            pending += chunks
            count += sum(map(len, chunks))
            while count >= batch_docs:
                texts = pa.concat_arrays(pending)
                yield texts[:batch_docs]
                pending, count = [texts[batch_docs:]], count - batch_docs
    if count:
        yield pa.concat_arrays(pending)


def iter_texts(corpus_dir: Path, batch_docs: int = 256) -> Iterator[str]:
    """Stream the `text` column of every Parquet file in `corpus_dir`, in order."""
    for texts in iter_text_arrays(corpus_dir, batch_docs):
        yield from texts.to_pylist()


def write_documents(source: str, docs: list[str], path: Path) -> None:
    """The documents of one corpus file as a Parquet file, ids `<source>#<k>`."""
    table = pa.table(
        {"id": [f"{source}#{k}" for k in range(len(docs))], "source": [source] * len(docs),
         "text": docs},
        schema=DOCUMENT_SCHEMA,
    )
    pq.write_table(table, path)


def count_documents(files: list[Path]) -> int:
    """The rows of the document tables `files`, from their footers."""
    return sum(pq.ParquetFile(p).metadata.num_rows for p in files)
