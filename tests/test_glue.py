"""gpt1.glue: TSVs read with quoting off, CSVs quoted, BOM tolerated, every row with its line, and
errors that name the file and line."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from gpt1.glue import (
    DataFormatError,
    parse_index,
    parse_label,
    parse_score,
    read_csv_with_header,
    read_tsv,
    read_tsv_with_header,
)


def _write(path: Path, text: str, bom: bool = False) -> Path:
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8"))
    return path


def test_literal_quote_does_not_merge_rows(tmp_path: Path) -> None:
    text = ('" the movie starts with a quote\t1\n'
            'he said " wow\t0\n'
            'a plain row\t1\n')
    path = _write(tmp_path / "train.tsv", text)
    # default CSV quoting would swallow the next rows into one field: the file is a real trap
    assert len(list(csv.reader(path.open(newline=""), delimiter="\t"))) < 3
    assert [tuple(row) for row in read_tsv(path, columns=2)] == [
        (1, ['" the movie starts with a quote', "1"]),
        (2, ['he said " wow', "0"]),
        (3, ["a plain row", "1"]),
    ]


def test_header_with_bom(tmp_path: Path) -> None:
    path = _write(tmp_path / "dev.tsv", "Quality\t#1 String\ncafé crème\t1\n", bom=True)
    header, rows = read_tsv_with_header(path)
    assert header.names == ["Quality", "#1 String"]  # no \ufeff on the first name
    assert (header.find("#1 String"), header.find("label")) == (1, None)
    assert [tuple(row) for row in rows] == [(2, ["café crème", "1"])]
    with pytest.raises(DataFormatError, match=re.escape(f"{path}:1: no column 'label' in the "
                                                        "header ['Quality', '#1 String']")):
        header.require("label")


def test_crlf_and_blank_lines_keep_line_numbers(tmp_path: Path) -> None:
    path = _write(tmp_path / "t.tsv", "index\tsentence\r\n0\tone\r\n\r\n1\ttwo\r\n")
    _, rows = read_tsv_with_header(path)
    assert [tuple(row) for row in rows] == [(2, ["0", "one"]), (4, ["1", "two"])]


def test_wrong_field_count_names_file_and_line(tmp_path: Path) -> None:
    path = _write(tmp_path / "train.tsv", "sentence\tlabel\nok\t1\n\nthree\tfields\t1\nok\t0\n")
    _, rows = read_tsv_with_header(path)
    with pytest.raises(DataFormatError, match=re.escape(f"{path}:4: expected 2 fields, got 3")):
        list(rows)
    path = _write(tmp_path / "cola.tsv", "gj04\t1\t\tFine.\nno label here\n")
    with pytest.raises(DataFormatError, match=re.escape(f"{path}:2: expected 4 fields, got 1")):
        list(read_tsv(path, columns=4))


def test_empty_file_has_no_header(tmp_path: Path) -> None:
    path = _write(tmp_path / "test.tsv", "\n")
    with pytest.raises(DataFormatError, match="empty, expected a header line"):
        read_tsv_with_header(path)


def test_csv_quoting_and_multiline_fields(tmp_path: Path) -> None:
    path = _write(tmp_path / "stories.csv",
                  'id,first,last\n1,"Hi, there.",Bye.\n2,"two\nlines",end\n3,x,y', bom=True)
    header, rows = read_csv_with_header(path)
    assert header.names == ["id", "first", "last"]
    assert [tuple(row) for row in rows] == [
        (2, ["1", "Hi, there.", "Bye."]), (3, ["2", "two\nlines", "end"]), (5, ["3", "x", "y"])]


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"nope\.tsv"):
        read_tsv_with_header(tmp_path / "nope.tsv")


def test_data_format_error_is_a_value_error() -> None:
    assert issubclass(DataFormatError, ValueError)


def test_parse_label() -> None:
    assert parse_label("f:2", "1", ("0", "1")) == 1
    assert parse_label("f:2", "entailment", ["contradiction", "entailment"]) == 1
    with pytest.raises(DataFormatError,
                       match=re.escape("train.tsv:7: label 'positive' is not one of ['0', '1']")):
        parse_label("train.tsv:7", "positive", ("0", "1"))


def test_parse_score_and_index() -> None:
    assert parse_score("f:2", "3.800") == 3.8
    for bad in ("high", "nan", "inf", ""):
        with pytest.raises(DataFormatError, match=f"f:2: score '{bad}' is not a finite number"):
            parse_score("f:2", bad)
    assert parse_index("f:2", "1724") == 1724
    with pytest.raises(DataFormatError, match=re.escape("f:3: index '1.5' is not an integer")):
        parse_index("f:3", "1.5")
