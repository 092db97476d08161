"""gpt1.glue: GLUE TSVs read with quoting off, BOM tolerated, malformed rows reported."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from gpt1.glue import DataFormatError, parse_label, read_tsv


def _write(path: Path, text: str, bom: bool = False) -> Path:
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8"))
    return path


def test_literal_quote_does_not_merge_rows(tmp_path: Path) -> None:
    text = ('sentence\tlabel\n'
            '" the movie starts with a quote\t1\n'
            'he said " wow\t0\n'
            'a plain row\t1\n')
    path = _write(tmp_path / "train.tsv", text)
    # default CSV quoting would swallow the next rows into one field: the file is a real trap
    default = list(csv.reader(path.open(newline=""), delimiter="\t"))
    assert len(default) < 4
    assert read_tsv(path, columns=2, header=True) == [
        ['" the movie starts with a quote', "1"],
        ['he said " wow', "0"],
        ["a plain row", "1"],
    ]


def test_utf8_bom_and_header(tmp_path: Path) -> None:
    path = _write(tmp_path / "dev.tsv", "sentence\tlabel\ncafé crème\t1\n", bom=True)
    assert read_tsv(path, columns=2, header=True) == [["café crème", "1"]]
    # without header skipping, the first field is the clean column name (no \ufeff)
    rows = read_tsv(path, columns=2, header=False)
    assert rows[0] == ["sentence", "label"]


def test_crlf_and_blank_lines(tmp_path: Path) -> None:
    path = _write(tmp_path / "t.tsv", "index\tsentence\r\n0\tone\r\n\r\n1\ttwo\r\n")
    assert read_tsv(path, columns=2, header=True) == [["0", "one"], ["1", "two"]]


def test_wrong_field_count_names_file_and_line(tmp_path: Path) -> None:
    path = _write(tmp_path / "train.tsv", "sentence\tlabel\nok\t1\n\nthree\tfields\t1\nok\t0\n")
    with pytest.raises(DataFormatError) as info:
        read_tsv(path, columns=2, header=True)
    message = str(info.value)
    assert f"{path}:4:" in message  # line 4 of the file (the blank line 3 counts)
    assert "expected 2" in message and "got 3" in message


def test_too_few_fields(tmp_path: Path) -> None:
    path = _write(tmp_path / "train.tsv", "sentence\tlabel\nno label here\n")
    with pytest.raises(DataFormatError, match=r"train\.tsv:2: expected 2 .* got 1"):
        read_tsv(path, columns=2, header=True)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"nope\.tsv"):
        read_tsv(tmp_path / "nope.tsv", columns=2, header=True)


def test_data_format_error_is_a_value_error() -> None:
    assert issubclass(DataFormatError, ValueError)


def test_parse_label(tmp_path: Path) -> None:
    path = tmp_path / "train.tsv"
    assert parse_label(path, 2, "0", ("0", "1")) == 0
    assert parse_label(path, 2, "1", ("0", "1")) == 1
    assert parse_label(path, 2, "entailment", ("contradiction", "entailment")) == 1
    with pytest.raises(DataFormatError) as info:
        parse_label(path, 7, "positive", ("0", "1"))
    message = str(info.value)
    assert str(path) in message and "row 7" in message and "'positive'" in message
    assert "['0', '1']" in message
