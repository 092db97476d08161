"""Documents for the clean stage's tests (gpt1.corpus.clean, gpt1.jobs.clean): two tables of
documents (id, source, text), some empty, too short or duplicates of others once clean."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

LONG_A = "It was a dark and stormy night; the rain fell in torrents."
LONG_B = "The quick brown fox didn't jump over the lazy dog at all."
LONG_C = "Call me Ishmael. Some years ago\u2014never mind how long precisely."
LONG_D = "Happy families are all alike; every unhappy family is unhappy in its own way."

DOCS_1 = [
    ("b1#0", LONG_A),
    ("b1#1", ""),  # empty
    ("b1#2", "Too short."),  # too short
    ("b1#3", LONG_B),
    ("b1#4", LONG_A),  # exact duplicate
]
DOCS_2 = [
    ("b2#0", "   \n\t  "),  # whitespace only: empty after cleaning
    ("b2#1", LONG_C),
    ("b2#2", "It was a dark  and stormy\nnight;   the rain fell in torrents."),  # same once clean
    ("b2#3", LONG_D),
    ("b2#4", "Hi!"),  # too short
]
MIN_CHARS = 30


def write_docs(path: Path, docs: list[tuple[str, str]], source: str) -> Path:
    """`docs`, (id, text) pairs all from `source`, as the table `path`."""
    table = pa.table({"id": [d for d, _ in docs], "source": [source] * len(docs),
                      "text": [t for _, t in docs]})
    pq.write_table(table, path)
    return path


def write_inputs(folder: Path) -> list[Path]:
    """DOCS_1 and DOCS_2 as the tables `00000.parquet` and `00001.parquet` of `folder`."""
    return [write_docs(folder / "00000.parquet", DOCS_1, "b1.txt"),
            write_docs(folder / "00001.parquet", DOCS_2, "b2.txt")]
