"""gpt1.downstream.glue: TSVs read with quoting off, CSVs quoted, BOM tolerated, every row with its
line, and
errors that name the file and line."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from gpt1.downstream.glue import (
    parse_index,
    parse_label,
    parse_score,
    read_csv_with_header,
    read_tsv,
    read_tsv_with_header,
)
from gpt1.errors import DataFormatError, utf8_errors


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
    with pytest.raises(DataFormatError, match=re.escape(f"{path}:1: no column 'label' (the file's "
                                                        "columns: Quality, #1 String)")):
        header.require("label")


def test_a_misnamed_column_is_named_with_the_one_meant(tmp_path: Path) -> None:
    """A header saying `Label` failed later as "rows without a label in the train split": a
    column close to the one looked up is a misnamed one, not a file without it."""
    path = _write(tmp_path / "train.tsv", "sentence\tLabel\nfine\t1\n")
    header, _ = read_tsv_with_header(path)
    for look_up in (header.find, header.require):
        with pytest.raises(DataFormatError, match=re.escape(
                f"{path}:1: no column 'label' (the file's columns: sentence, Label; the "
                "closest: 'Label')")):
            look_up("label")
    assert header.find("index") is None  # nothing like it: a column the file does without


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


def test_unclosed_csv_quote_names_its_row(tmp_path: Path) -> None:
    # non-strict CSV would take the rest of the file into the open field: row 3 would vanish
    path = _write(tmp_path / "stories.csv", 'id,text\n1,"open quote\n2,lost\n')
    _, rows = read_csv_with_header(path)
    with pytest.raises(DataFormatError, match=re.escape(f"{path}:2: unexpected end of data")):
        list(rows)
    path = _write(tmp_path / "stray.csv", 'id,text\n1,"quoted"then more\n')
    _, rows = read_csv_with_header(path)
    with pytest.raises(DataFormatError, match=re.escape(f"{path}:2: ',' expected after '\"'")):
        list(rows)


def test_field_past_csv_size_limit_names_its_line(tmp_path: Path) -> None:
    path = _write(tmp_path / "train.tsv", "sentence\tlabel\nok\t1\n" + "x" * 200_000 + "\t0\n")
    _, rows = read_tsv_with_header(path)
    with pytest.raises(DataFormatError, match=re.escape(f"{path}:3: field larger than field")):
        list(rows)


def _read_all(path: Path) -> None:
    header_and_rows = read_csv_with_header if path.suffix == ".csv" else read_tsv_with_header
    list(header_and_rows(path)[1])


def test_non_utf8_names_line_and_byte(tmp_path: Path) -> None:
    tsv_bytes = "sentence\tlabel\ncafé\t1\n".encode() + b"bad \xff byte\t0\n"
    path = tmp_path / "train.tsv"
    path.write_bytes(b"\xef\xbb\xbf" + tsv_bytes)  # the BOM counts in the byte offset
    offset = 3 + tsv_bytes.index(b"\xff")
    with pytest.raises(DataFormatError,
                       match=re.escape(f"{path}:3: not UTF-8 text (byte {offset}: 0xff)")):
        _read_all(path)
    # past the decoder's first chunk, and a character cut short at the end of the file
    path = tmp_path / "late.csv"
    body = b"id,text\n" + b"1,fine\n" * 5000
    path.write_bytes(body + b"2,caf\xc3")
    message = f"{path}:5002: not UTF-8 text (byte {len(body) + 5}: 0xc3)"
    with pytest.raises(DataFormatError, match=re.escape(message)):
        _read_all(path)
    with pytest.raises(DataFormatError, match=re.escape(message)), utf8_errors(path):
        path.read_text(encoding="utf-8")


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


def test_parse_score_in_range() -> None:
    assert [parse_score("f:2", v, 0, 5) for v in ("3.800", "0", "5.000", "0.0")] == [3.8, 0, 5, 0]
    for bad in ("-40", "7.5", "5.001", "1e9", "-0.1", "nan", "inf", "-inf", "high", ""):
        with pytest.raises(DataFormatError,
                           match=re.escape(f"f:2: score '{bad}' is not a number from 0 to 5")):
            parse_score("f:2", bad, 0, 5)


def test_parse_index() -> None:
    assert parse_index("f:2", "1724") == 1724
    assert parse_index("f:2", "0") == 0
    for bad in ("1.5", "-1", "+3", " 3", "1_000", "", "x"):
        with pytest.raises(DataFormatError,
                           match=re.escape(f"f:3: index '{bad}' is not a whole number from 0")):
            parse_index("f:3", bad)
