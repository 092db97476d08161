"""gpt1.corpus.documents: stream the text column of the document tables, in file and row order;
write one book's documents as a table; count a folder's documents."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpt1.corpus.documents import count_documents, iter_texts, write_documents


def _write(path: Path, texts: list[str]) -> None:
    pq.write_table(pa.table({"id": [f"{path.stem}#{i}" for i in range(len(texts))],
                             "source": [path.stem] * len(texts), "text": texts}), path)


def test_streams_in_file_then_row_order(tmp_path: Path) -> None:
    _write(tmp_path / "00001.parquet", ["third", "fourth", "fifth"])
    _write(tmp_path / "00000.parquet", ["first", "second"])
    (tmp_path / "notes.txt").write_text("not a table")
    assert list(iter_texts(tmp_path, batch_docs=2)) == ["first", "second", "third", "fourth",
                                                        "fifth"]
    assert list(iter_texts(tmp_path)) == ["first", "second", "third", "fourth", "fifth"]


def test_is_lazy(tmp_path: Path) -> None:
    _write(tmp_path / "00000.parquet", [f"doc {i}" for i in range(1000)])
    it = iter_texts(tmp_path, batch_docs=10)
    assert next(it) == "doc 0"
    assert next(it) == "doc 1"


def test_empty_dir(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no Parquet files"):
        list(iter_texts(tmp_path))


def test_a_books_documents_as_a_table(tmp_path: Path) -> None:
    write_documents("books/a.txt", ["First.", "Second one."], tmp_path / "00000.parquet")
    table = pq.read_table(tmp_path / "00000.parquet")
    assert table.schema == pa.schema([("id", pa.string()), ("source", pa.string()),
                                      ("text", pa.string())])
    assert table.to_pylist() == [
        {"id": "books/a.txt#0", "source": "books/a.txt", "text": "First."},
        {"id": "books/a.txt#1", "source": "books/a.txt", "text": "Second one."}]
    write_documents("empty.txt", [], tmp_path / "00001.parquet")
    assert pq.read_table(tmp_path / "00001.parquet").num_rows == 0


def test_count_documents_from_the_footers(tmp_path: Path) -> None:
    _write(tmp_path / "00000.parquet", ["a", "b", "c"])
    _write(tmp_path / "00001.parquet", ["d"])
    assert count_documents(sorted(tmp_path.glob("*.parquet"))) == 4
    assert count_documents([]) == 0
