"""gpt1.readers: the SST-2 reader on small files in GLUE's release format."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from gpt1.glue import DataFormatError
from gpt1.readers import CLASSIFICATION_SCHEMA, READERS, read_task_split
from gpt1.registry import TASKS


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    sst = tmp_path / "glue" / "SST-2"
    sst.mkdir(parents=True)
    (sst / "train.tsv").write_text(
        "sentence\tlabel\n"
        "a gorgeous , witty film \t1\n"
        'it " stinks " \t0\n'
        "no plot to speak of\t0\n"
    )
    (sst / "dev.tsv").write_bytes(
        "\ufeffsentence\tlabel\nit 's a charming journey . \t1\n".encode()
    )
    (sst / "test.tsv").write_text(
        "index\tsentence\n"
        "5\tuneasy mishmash of styles and genres .\n"
        "7\tthis film 's relationship to actual tension is that of what ?\n"
    )
    return tmp_path


def test_every_task_has_a_reader() -> None:
    assert set(READERS) == set(TASKS)


def test_train_split(root: Path) -> None:
    table = read_task_split("sst2", root, "train")
    assert table.schema == CLASSIFICATION_SCHEMA
    assert table.to_pydict() == {
        "idx": [0, 1, 2],
        "text": ["a gorgeous , witty film ", 'it " stinks " ', "no plot to speak of"],
        "label": [1, 0, 0],
    }


def test_dev_split_with_bom(root: Path) -> None:
    table = read_task_split("sst2", root, "dev")
    assert table.schema == CLASSIFICATION_SCHEMA
    assert table.to_pydict() == {"idx": [0], "text": ["it 's a charming journey . "],
                                 "label": [1]}


def test_test_split_is_unlabelled_with_its_idx(root: Path) -> None:
    table = read_task_split("sst2", root, "test")
    assert table.schema == CLASSIFICATION_SCHEMA
    assert table.column("idx").to_pylist() == [5, 7]
    assert table.column("text").to_pylist()[0] == "uneasy mishmash of styles and genres ."
    assert table.column("label").null_count == 2
    assert table.column("label").type == pa.int64()


def test_bad_label_names_file_and_line(root: Path) -> None:
    path = root / "glue" / "SST-2" / "train.tsv"
    path.write_text("sentence\tlabel\ngood\t1\nbad\tnegative\n")
    with pytest.raises(DataFormatError) as info:
        read_task_split("sst2", root, "train")
    assert str(path) in str(info.value) and "row 3" in str(info.value)
    assert "'negative'" in str(info.value)


def test_wrong_columns_in_test_split(root: Path) -> None:
    (root / "glue" / "SST-2" / "test.tsv").write_text("index\tsentence\nonly-one-field\n")
    with pytest.raises(DataFormatError, match=r"test\.tsv:2:"):
        read_task_split("sst2", root, "test")


def test_missing_split(root: Path) -> None:
    (root / "glue" / "SST-2" / "dev.tsv").unlink()
    with pytest.raises(FileNotFoundError, match="sst2: dev split expected at"):
        read_task_split("sst2", root, "dev")


def test_unknown_task(root: Path) -> None:
    with pytest.raises(ValueError, match="unknown task 'nope'"):
        read_task_split("nope", root, "train")


@pytest.fixture()
def cola_root(tmp_path: Path) -> Path:
    cola = tmp_path / "glue" / "CoLA"
    cola.mkdir(parents=True)
    (cola / "train.tsv").write_text(  # no header; source, label, mark, sentence
        "gj04\t1\t\tOur friends won't buy this analysis, let alone the next one we propose.\n"
        'r-67\t0\t*\tThey said "quote this\n'
        "bc01\t1\t\tThe sailors rode the breeze clear of the rocks.\n"
    )
    (cola / "dev.tsv").write_text("gj04\t0\t*\tHer efficient looking at of the report.\n")
    (cola / "test.tsv").write_text("index\tsentence\n0\tBill whistled past the house.\n")
    return tmp_path


def test_cola_train_has_no_header_and_four_columns(cola_root: Path) -> None:
    table = read_task_split("cola", cola_root, "train")
    assert table.schema == CLASSIFICATION_SCHEMA
    assert table.to_pydict() == {
        "idx": [0, 1, 2],
        "text": ["Our friends won't buy this analysis, let alone the next one we propose.",
                 'They said "quote this', "The sailors rode the breeze clear of the rocks."],
        "label": [1, 0, 1],
    }
    assert read_task_split("cola", cola_root, "dev").column("label").to_pylist() == [0]


def test_cola_test_split(cola_root: Path) -> None:
    table = read_task_split("cola", cola_root, "test")
    assert table.column("idx").to_pylist() == [0]
    assert table.column("text").to_pylist() == ["Bill whistled past the house."]
    assert table.column("label").null_count == 1


def test_cola_bad_label_names_the_line(cola_root: Path) -> None:
    path = cola_root / "glue" / "CoLA" / "train.tsv"
    path.write_text("gj04\t1\t\tFine.\ngj04\t1\t\tFine too.\ngj04\tx\t\tBad.\n")
    with pytest.raises(DataFormatError) as info:
        read_task_split("cola", cola_root, "train")
    assert str(path) in str(info.value) and "row 3" in str(info.value)  # no header line
