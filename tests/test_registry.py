"""gpt1.registry: the SST-2 reader on small GLUE-format files."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from gpt1.glue import DataFormatError
from gpt1.registry import CLASSIFICATION_SCHEMA, SPLITS, TASKS, read_task_split


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


def test_sst2_spec() -> None:
    spec = TASKS["sst2"]
    assert spec.title == "SST-2"
    assert spec.family == "classification"
    assert spec.labels == ("0", "1")
    assert spec.metric == "accuracy"
    assert spec.paper_score == 91.3
    assert set(spec.files) == set(SPLITS)


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
