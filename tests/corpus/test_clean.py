"""gpt1.corpus.clean: clean_corpus drops empty, too-short and duplicate documents, in input
order; clean_folder (stage clean's job) writes the clean table and its stats in place of the
folder, or fails leaving it as it was."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpt1.config import CleanParams, ExecutorParams
from gpt1.corpus.clean import clean_corpus
from gpt1.corpus.documents import DOCUMENT_SCHEMA
from gpt1.corpus.text import TextCleaner
from gpt1.errors import InputError
from gpt1.jobs.clean import clean_folder

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


def _write(path: Path, docs: list[tuple[str, str]], source: str) -> Path:
    table = pa.table({"id": [d for d, _ in docs], "source": [source] * len(docs),
                      "text": [t for _, t in docs]})
    pq.write_table(table, path)
    return path


@pytest.fixture()
def inputs(tmp_path: Path) -> list[Path]:
    return [_write(tmp_path / "00000.parquet", DOCS_1, "b1.txt"),
            _write(tmp_path / "00001.parquet", DOCS_2, "b2.txt")]


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
    path = _write(tmp_path / "in.parquet", [("x#0", LONG_A)], "x")
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


def test_clean_folder_replaces_the_folder_with_the_table_and_its_stats(
        inputs: list[Path], tmp_path: Path) -> None:
    out = tmp_path / "clean"
    out.mkdir()
    (out / "stale.txt").write_text("from an earlier run")
    params = CleanParams(batch_docs=2, min_chars=MIN_CHARS, dedupe=True)
    stats = clean_folder(tmp_path, out, params, ExecutorParams(workers=1))
    assert sorted(os.listdir(out)) == ["corpus.parquet", "stats.json"]
    assert pq.read_table(out / "corpus.parquet").column("id").to_pylist() == [
        "b1#0", "b1#3", "b2#1", "b2#3"]
    chars_in = sum(len(t) for _, t in DOCS_1 + DOCS_2)
    assert (out / "stats.json").read_text() == (
        f'{{\n  "docs_in": 10,\n  "docs_out": 4,\n  "chars_in": {chars_in},\n'
        f'  "chars_out": {stats.chars_out},\n  "dropped": {{\n    "empty": 2,\n'
        '    "too_short": 2,\n    "duplicate": 2\n  }\n}\n')


def test_clean_folder_without_input_or_with_nothing_left_fails_as_bad_input(
        inputs: list[Path], tmp_path: Path) -> None:
    out = tmp_path / "clean"
    out.mkdir()
    (out / "kept.txt").write_text("from an earlier run")
    executor = ExecutorParams(workers=1)
    (tmp_path / "raw").mkdir()
    with pytest.raises(FileNotFoundError, match=rf"^{tmp_path / 'raw'}: no Parquet files \(run "
                                                r"the ingest stage first\)$"):
        clean_folder(tmp_path / "raw", out, CleanParams(batch_docs=2, min_chars=1, dedupe=True),
                     executor)
    with pytest.raises(InputError, match=r"^clean: every document was dropped \(\{"):
        clean_folder(tmp_path, out, CleanParams(batch_docs=2, min_chars=10_000, dedupe=True),
                     executor)
    assert os.listdir(out) == ["kept.txt"]
