"""Delimited release files: GLUE's TSVs (as `download_glue_data.py` writes them), SciTail's TSVs
and Story Cloze's CSVs, read row by row with the line each row starts on, so that every error
names the file and line at fault. `delimited_rows` also reads the CSVs and TSVs of
`gpt1.downstream.tables`."""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from gpt1.errors import DataFormatError, utf8_errors


def closest(name: str, names: Sequence[str]) -> str | None:
    """The one of `names` that is `name` but for case and punctuation (`Label` for `label`,
    `Sentence_1` for `sentence1`), if any: a name with other letters or digits is another
    column (`sentence2` is not `sentence1`)."""
    def folded(n: str) -> str:
        return re.sub(r"[\W_]+", "", n).casefold()

    return next((n for n in names if folded(n) == folded(name)), None)


def missing(where: str, name: str, names: Sequence[str], what: str = "column",
            purpose: str | None = None) -> DataFormatError:
    """The error of a `what` (column, key) named `name`, read for `purpose`, that is not among
    `names`: one line listing them, and the closest where one is close."""
    close = closest(name, names)
    hint = f"; the closest: {close!r}" if close is not None else ""
    listed = ", ".join(names) if names else "none"
    wanted = f" for {purpose}" if purpose else ""
    return DataFormatError(f"{where}: no {what} {name!r}{wanted} (the file's {what}s: "
                           f"{listed}{hint})")


class Row(NamedTuple):
    line: int  # the line of the file the row starts on, from 1
    fields: list[str]


@dataclass(frozen=True)
class Header:
    """The first row of a file that names its columns."""

    path: Path
    line: int
    names: list[str]

    def find(self, name: str) -> int | None:
        """Position of column `name`, or None where the file lacks it (GLUE test files: labels)
        and has no column of a name close to it: `Label` for `label` is a misnamed column, an
        error, not a file without labels."""
        if name in self.names:
            return self.names.index(name)
        if closest(name, self.names) is not None:
            raise missing(f"{self.path}:{self.line}", name, self.names)
        return None

    def require(self, name: str) -> int:
        position = self.find(name)
        if position is None:
            raise missing(f"{self.path}:{self.line}", name, self.names)
        return position


# GLUE's (and SciTail's) TSVs are read with quoting off: GLUE sentences hold literal `"`
# characters, which default CSV quoting would take for quotes and merge rows over.
GLUE_TSV: Mapping[str, Any] = {"delimiter": "\t", "quoting": csv.QUOTE_NONE}
# CSVs (Story Cloze) are quoted the standard way, strictly: a quote left open would otherwise
# swallow the rows after it into one field.
QUOTED_CSV: Mapping[str, Any] = {"strict": True}


def delimited_rows(path: Path, dialect: Mapping[str, Any]) -> Iterator[Row]:
    """Non-blank rows of a file read by Python's `csv` with `dialect` (keyword arguments of
    `csv.reader`), each with the line it starts on; a UTF-8 byte-order mark is tolerated."""
    with path.open(encoding="utf-8-sig", newline="") as fh, utf8_errors(path):
        reader = csv.reader(fh, **dialect)
        line = 1
        try:
            for fields in reader:
                if fields:
                    yield Row(line, fields)
                line = reader.line_num + 1  # a quoted CSV field may span lines
        except csv.Error as err:  # a quote left open, a field past csv's size limit
            raise DataFormatError(f"{path}:{line}: {err}") from None


def _checked(path: Path, rows: Iterator[Row], columns: int) -> Iterator[Row]:
    for row in rows:
        if len(row.fields) != columns:
            raise DataFormatError(f"{path}:{row.line}: expected {columns} fields, "
                                  f"got {len(row.fields)}")
        yield row


def read_tsv(path: Path, columns: int) -> Iterator[Row]:
    """Rows of a TSV without a header line, each with exactly `columns` fields."""
    return _checked(path, delimited_rows(path, GLUE_TSV), columns)


def with_header(path: Path, rows: Iterator[Row]) -> tuple[Header, Iterator[Row]]:
    """The first of `rows`, the header, and the others, each with as many fields as it names."""
    first = next(rows, None)
    if first is None:
        raise DataFormatError(f"{path}: empty, expected a header line")
    header = Header(path, first.line, [name.strip() for name in first.fields])
    return header, _checked(path, rows, len(header.names))


def read_tsv_with_header(path: Path) -> tuple[Header, Iterator[Row]]:
    """The header of a TSV and its other rows, each with as many fields as the header names."""
    return with_header(path, delimited_rows(path, GLUE_TSV))


def read_csv_with_header(path: Path) -> tuple[Header, Iterator[Row]]:
    """The header of a CSV and its other rows, each with as many fields as the header names."""
    return with_header(path, delimited_rows(path, QUOTED_CSV))


def parse_label(where: str, value: str, labels: Sequence[str]) -> int:
    """Index of `value` in `labels`, or a DataFormatError that starts with `where` (file:line)."""
    try:
        return list(labels).index(value)
    except ValueError:
        raise DataFormatError(f"{where}: label {value!r} is not one of {list(labels)}") from None


def parse_score(where: str, value: str, low: float, high: float) -> float:
    """A number from `low` to `high` (a regression target such as STS-B's similarity, 0 to 5)."""
    try:
        score = float(value)
    except ValueError:
        score = math.nan
    if not low <= score <= high:  # nan fails every comparison
        raise DataFormatError(f"{where}: score {value!r} is not a number from {low:g} to {high:g}")
    return score


def parse_index(where: str, value: str) -> int:
    """A release's own example index (GLUE's `index`, QQP's `id`): a whole number from 0."""
    if not re.fullmatch(r"[0-9]+", value):
        raise DataFormatError(f"{where}: index {value!r} is not a whole number from 0")
    return int(value)
