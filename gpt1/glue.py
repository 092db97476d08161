"""Readers for GLUE's TSV release files (as written by `download_glue_data.py`)."""

from __future__ import annotations

import csv
from pathlib import Path


class DataFormatError(ValueError):
    """A data file does not have the layout its reader expects; the message names file and line."""


def read_tsv(path: Path, columns: int, header: bool) -> list[list[str]]:
    """Rows of a GLUE TSV, each with exactly `columns` fields.

    GLUE sentences hold literal `"` characters, so quoting is off (default CSV quoting merges
    rows); a UTF-8 byte-order mark is tolerated; `header` says whether line 1 names the columns.
    """
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not found")
    rows: list[list[str]] = []
    with path.open(encoding="utf-8-sig", newline="") as fh:
        reader = csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)
        for line_no, row in enumerate(reader, start=1):
            if header and line_no == 1:
                continue
            if not row:
                continue
            if len(row) != columns:
                raise DataFormatError(
                    f"{path}:{line_no}: expected {columns} tab-separated fields, got {len(row)}"
                )
            rows.append(row)
    return rows


def parse_label(path: Path, row_no: int, value: str, labels: tuple[str, ...]) -> int:
    """Index of `value` in `labels`, or a DataFormatError naming the file and row."""
    try:
        return labels.index(value)
    except ValueError:
        raise DataFormatError(
            f"{path}: row {row_no}: label {value!r} is not one of {list(labels)}"
        ) from None
