"""gpt1.corpus.clean: clean_corpus drops empty, too-short and duplicate documents, in input
order. (Stage clean's job, clean_folder: tests/jobs/test_clean.py.)"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from gpt1.config import ExecutorParams
from gpt1.corpus.clean import clean_corpus
from gpt1.corpus.documents import DOCUMENT_SCHEMA
from gpt1.corpus.text import TextCleaner
from tests.clean_docs import (
    DOCS_1,
    DOCS_2,
    LONG_A,
    LONG_B,
    LONG_C,
    LONG_D,
    MIN_CHARS,
    write_docs,
    write_inputs,
)


@pytest.fixture()
def inputs(tmp_path: Path) -> list[Path]:
    return write_inputs(tmp_path)


def _run(inputs: list[Path], out: Path, workers: int, dedupe: bool = True):
    stats = clean_corpus(inputs, out, executor=ExecutorParams(workers=workers), batch_docs=2,
                         min_chars=MIN_CHARS,
                         dedupe=dedupe)
    return stats, pq.read_table(out)


def test_drops_and_stats(inputs: list[Path], tmp_path: Path) -> None:
    cleaner = TextCleaner()
    stats, table = _run(inputs, tmp_path / "clean.parquet", workers=1)
    assert table.schema == DOCUMENT_SCHEMA
    assert table.column("id").to_pylist() == ["b1#0", "b1#3", "b2#1", "b2#3"]  # input order
    assert table.column("source").to_pylist() == ["b1.txt", "b1.txt", "b2.txt", "b2.txt"]
    texts = table.column("text").to_pylist()
    assert texts == [cleaner(LONG_A), cleaner(LONG_B), cleaner(LONG_C), cleaner(LONG_D)]
    assert "did n't" in texts[1]
    assert stats.docs_in == 10
    assert stats.docs_out == 4
    assert dict(stats.dropped) == {"empty": 2, "too_short": 2, "duplicate": 2}
    all_docs = DOCS_1 + DOCS_2
    assert stats.chars_in == sum(len(t) for _, t in all_docs)
    assert stats.chars_out == sum(len(t) for t in texts)
    assert stats.as_dict() == {
        "docs_in": 10, "docs_out": 4, "chars_in": stats.chars_in, "chars_out": stats.chars_out,
        "dropped": {"empty": 2, "too_short": 2, "duplicate": 2},
    }


def test_as_dict_lists_every_reason(tmp_path: Path) -> None:
    path = write_docs(tmp_path / "in.parquet", [("x#0", LONG_A)], "x")
    stats = clean_corpus([path], tmp_path / "out.parquet", executor=ExecutorParams(workers=1),
                         batch_docs=4,
                         min_chars=1, dedupe=True)
    assert stats.as_dict()["dropped"] == {"empty": 0, "too_short": 0, "duplicate": 0}


def test_without_dedupe_duplicates_are_kept(inputs: list[Path], tmp_path: Path) -> None:
    stats, table = _run(inputs, tmp_path / "clean.parquet", workers=1, dedupe=False)
    assert table.column("id").to_pylist() == ["b1#0", "b1#3", "b1#4", "b2#1", "b2#2", "b2#3"]
    assert stats.dropped["duplicate"] == 0


def test_two_workers_give_the_same_output(inputs: list[Path], tmp_path: Path) -> None:
    stats1, table1 = _run(inputs, tmp_path / "w1.parquet", workers=1)
    stats2, table2 = _run(inputs, tmp_path / "w2.parquet", workers=2)
    assert table1.equals(table2)
    assert stats1.as_dict() == stats2.as_dict()
    assert table2.num_rows == 4
