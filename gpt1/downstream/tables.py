"""Ordinary tables (CSV, TSV, JSON Lines, Parquet), streamed in batches of rows that remember
where each row is in its file, so that every error names the file and line (or row) at fault.
`reader: table` tasks read their files through here (`gpt1.downstream.readers`), as does
scoring new files with a fine-tuned model.

CSV and TSV are read with Python's `csv` module (`gpt1.downstream.glue.delimited_rows`), not
`pyarrow.csv`: measured with pyarrow 26, pyarrow.csv gives no line number for a bad row
(`InvalidRow.number` is None), and a quote left open in a row's last field silently swallows
the rest of the file into that field, where `csv` in strict mode fails naming the line the row
starts on. Both are quoted the standard way (a TSV written by pandas or a spreadsheet quotes
fields holding tabs or line breaks), unlike GLUE's TSVs.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any, TypeVar, get_args

import pyarrow as pa
import pyarrow.parquet as pq

from gpt1.config import FAMILY_FIELDS, TABLE_EXTENSIONS, Family, TableFormat
from gpt1.downstream.glue import (
    QUOTED_CSV,
    Header,
    Row,
    delimited_rows,
    missing,
    with_header,
)
from gpt1.errors import DataFormatError, InputError, utf8_errors

DIALECTS: dict[str, Mapping[str, Any]] = {"csv": QUOTED_CSV,
                                          "tsv": {**QUOTED_CSV, "delimiter": "\t"}}
_JSON_TYPES = {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
               int: "a number", float: "a number", type(None): "null"}
# a multiple-choice example may have no question (Story Cloze): the one text that may be empty
_OPTIONAL_TEXT = "question"

T = TypeVar("T")


@dataclass(frozen=True)
class TableBatch:
    """Consecutive rows of a table file."""

    # the rows, columns named as in the file. CSV and TSV: every column a string. JSON Lines:
    # strings, lists (of strings, each item's JSON text where it is not one) where a key holds
    # nothing but lists, a number or boolean as its JSON text, null as null. Parquet: as stored.
    table: pa.Table
    # per row, for error messages: `path:LINE` (the line the row starts on, from 1, the header
    # counted) for CSV, TSV and JSON Lines; `path: row N` (from 1) for Parquet
    where: list[str]
    path: Path  # the file, which an error about a whole column names

    def take(self, rows: list[int]) -> TableBatch:
        """The batch of rows `rows` (positions in this one), in that order."""
        return TableBatch(self.table.take(pa.array(rows, pa.int64())),
                          [self.where[i] for i in rows], self.path)


TASK_FORMAT = "a task's table.format, or `gpt1 task add --format`"


def table_format(path: Path, named: str | None = None, how: str | None = TASK_FORMAT) -> str:
    """The format of table file `path`: `named` where given, else from its extension. `how`
    says where the reader of `path` names a format (None: nowhere, the extension alone)."""
    formats = get_args(TableFormat)
    if named is not None:
        if named not in formats:
            raise InputError(f"{path}: format {named!r} is not one of {', '.join(formats)}")
        return named
    fmt = TABLE_EXTENSIONS.get(path.suffix.lower())
    if fmt is None:
        name_it = f"name it ({', '.join(formats)}: {how}), or " if how else ""
        raise DataFormatError(f"{path}: cannot tell its format from the extension "
                              f"{path.suffix!r}: {name_it}name the file "
                              f"{', '.join(TABLE_EXTENSIONS)}")
    return fmt


def table_columns(path: Path, fmt: str | None = None) -> list[str]:
    """The names of the table's columns: a CSV's or TSV's header, a Parquet file's schema, the
    keys of a JSON Lines file's first batch of rows."""
    fmt = table_format(path, fmt)
    if fmt in DIALECTS:
        rows = delimited_rows(path, DIALECTS[fmt])
        try:
            return _header(path, rows)[0].names
        finally:
            rows.close()
    if fmt == "parquet":
        return _parquet(path).schema_arrow.names
    batches = iter_batches(path, fmt)
    try:
        first = next(batches, None)
    finally:
        batches.close()
    if first is None:
        raise DataFormatError(f"{path}: empty, expected a JSON object a line")
    return first.table.column_names


def iter_batches(path: Path, fmt: str | None = None,
                 batch_rows: int = 4096) -> Iterator[TableBatch]:
    """The rows of table file `path` in batches of at most `batch_rows`, read as they are
    needed: memory is bounded by the batch, whatever the file's size. Blank lines are skipped;
    a UTF-8 byte-order mark is tolerated. Raises DataFormatError naming the file and line (or
    row) of the first row that cannot be read."""
    fmt = table_format(path, fmt)
    if fmt in DIALECTS:
        return _delimited_batches(path, DIALECTS[fmt], batch_rows)
    if fmt == "jsonl":
        return _jsonl_batches(path, batch_rows)
    return _parquet_batches(path, batch_rows)


def _chunks(items: Iterable[T], size: int) -> Iterator[list[T]]:
    it = iter(items)
    while chunk := list(islice(it, size)):
        yield chunk


# -- CSV and TSV ---------------------------------------------------------------------------------


def _header(path: Path, rows: Iterator[Row]) -> tuple[Header, Iterator[Row]]:
    header, body = with_header(path, rows)
    seen = set()
    for name in header.names:
        if name in seen:
            raise DataFormatError(f"{path}:{header.line}: column {name!r} twice in the header")
        seen.add(name)
    return header, body


def _delimited_batches(path: Path, dialect: Mapping[str, Any],
                       batch_rows: int) -> Iterator[TableBatch]:
    header, rows = _header(path, delimited_rows(path, dialect))
    for chunk in _chunks(rows, batch_rows):
        fields = zip(*(row.fields for row in chunk), strict=True)
        table = pa.Table.from_arrays([pa.array(column, pa.string()) for column in fields],
                                     names=header.names)
        yield TableBatch(table, [f"{path}:{row.line}" for row in chunk], path)


# -- JSON Lines ----------------------------------------------------------------------------------


def _record(where: str, text: str) -> dict[str, object]:
    try:
        record = json.loads(text)
    except json.JSONDecodeError as err:
        raise DataFormatError(f"{where}: not a JSON object: {err.msg}") from None
    if not isinstance(record, dict):
        raise DataFormatError(f"{where}: not a JSON object: {_JSON_TYPES[type(record)]}")
    return record


def _json_text(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _json_column(values: list[object]) -> pa.Array:
    """A key's values: lists of texts where it holds nothing but lists (and nulls); where it
    holds an object, those objects (a struct column, which no field reads as text; its other
    values are left out); else texts."""
    present = [v for v in values if v is not None]
    if any(isinstance(v, dict) for v in present):
        try:
            return pa.array([v if isinstance(v, dict) else None for v in values])
        except pa.ArrowException:  # objects of clashing shapes: still no text
            return pa.array([{"object": json.dumps(v)} if isinstance(v, dict) else None
                             for v in values])
    if present and all(isinstance(v, list) for v in present):
        lists = [[_json_text(item) for item in v] if isinstance(v, list) else None
                 for v in values]
        return pa.array(lists, pa.list_(pa.string()))
    return pa.array([_json_text(v) for v in values], pa.string())


def _records_table(records: list[dict[str, object]]) -> pa.Table:
    names = list(dict.fromkeys(key for record in records for key in record))
    return pa.Table.from_arrays([_json_column([r.get(name) for r in records]) for name in names],
                                names=names)


def _jsonl_records(path: Path) -> Iterator[tuple[str, dict[str, object]]]:
    with path.open(encoding="utf-8-sig") as fh, utf8_errors(path):
        for line, text in enumerate(fh, start=1):
            if text.strip():
                where = f"{path}:{line}"
                yield where, _record(where, text)


def _jsonl_batches(path: Path, batch_rows: int) -> Iterator[TableBatch]:
    for chunk in _chunks(_jsonl_records(path), batch_rows):
        yield TableBatch(_records_table([record for _, record in chunk]),
                         [where for where, _ in chunk], path)


# -- Parquet -------------------------------------------------------------------------------------


def _parquet(path: Path) -> pq.ParquetFile:
    try:
        return pq.ParquetFile(path)
    except pa.ArrowException as err:
        raise DataFormatError(f"{path}: not a Parquet file ({err})") from None


def _parquet_batches(path: Path, batch_rows: int) -> Iterator[TableBatch]:
    start = 1
    batches = _parquet(path).iter_batches(batch_size=batch_rows)
    while True:
        try:
            batch = next(batches, None)
        except pa.ArrowException as err:
            raise DataFormatError(f"{path}: from row {start}: cannot be read ({err})") from None
        if batch is None:
            return
        rows = range(start, start + batch.num_rows)
        yield TableBatch(pa.Table.from_batches([batch]), [f"{path}: row {n}" for n in rows], path)
        start += batch.num_rows


# -- a family's fields ---------------------------------------------------------------------------


def _text(value: object) -> str | None:
    """A cell as text: a string as it is, a number or boolean as its JSON text (`1`, `4.5`,
    `true`), anything else as Python writes it; None where null."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return json.dumps(value)
    return str(value)


def _column(batch: TableBatch, column: str, field: str) -> pa.ChunkedArray:
    """Column `column` of the batch, read for `field`: a column the file lacks is a
    DataFormatError listing the file's columns."""
    if column not in batch.table.column_names:
        raise missing(str(batch.path), column, batch.table.column_names, purpose=field)
    return batch.table.column(column)


def column_texts(batch: TableBatch, column: str, field: str) -> list[str | None]:
    """Column `column` of the batch (read for `field`, which an error names) as text per row
    (see `_text`), None where null. A column of lists, objects or maps is a DataFormatError:
    its Python repr is no text the model was meant to read."""
    values = _column(batch, column, field)
    texts = values.to_pylist()
    if pa.types.is_nested(values.type):
        where = next((w for w, v in zip(batch.where, texts, strict=True) if v is not None), None)
        if where is not None:
            raise DataFormatError(f"{where}: column {column!r} ({field}) holds {values.type}, "
                                  "not text: give its text in the column")
    return [_text(value) for value in texts]


def _texts(batch: TableBatch, column: str, field: str) -> list[str]:
    values = column_texts(batch, column, field)
    for where, value in zip(batch.where, values, strict=True):
        if field != _OPTIONAL_TEXT and (value is None or not value.strip()):
            raise DataFormatError(f"{where}: column {column!r} ({field}) is empty")
    return [value or "" for value in values]


def _list_column(batch: TableBatch, column: str) -> list[list[str]]:
    """The choices of each row from one column holding a list of texts."""
    values = _column(batch, column, "choices")
    lists = (pa.types.is_list(values.type) or pa.types.is_large_list(values.type)
             or pa.types.is_fixed_size_list(values.type))
    if batch.table.num_rows and (not lists or pa.types.is_nested(values.type.value_type)):
        raise DataFormatError(f"{batch.where[0]}: column {column!r} (choices) holds a "
                              f"{values.type}, not a list of texts: name one column per choice "
                              "(choices: [a, b]), or give a list in each row")
    choices = []
    for where, row in zip(batch.where, values.to_pylist(), strict=True):
        texts = [_text(item) for item in row or []]
        if len(texts) < 2 or any(text is None or not text.strip() for text in texts):
            raise DataFormatError(f"{where}: column {column!r} (choices): expected a list of at "
                                  f"least 2 texts, none empty, got {row!r}")
        choices.append(texts)
    return choices


def _choices(batch: TableBatch, column: str | list[str]) -> list[list[str]]:
    if isinstance(column, str):
        return _list_column(batch, column)
    per_column = [_texts(batch, name, "choices") for name in column]
    return [list(row) for row in zip(*per_column, strict=True)]


def select_fields(batch: TableBatch, family: Family,
                  columns: Mapping[str, str | list[str]]) -> dict[str, list[object]]:
    """The text fields of `family` (not `label`) from a batch, read from the columns `columns`
    maps them to (a field it does not name: the column of the field's own name): per field a
    text per row; for `choices`, a list of texts per row, from one list column or from several
    columns. A missing column or an empty text is a DataFormatError naming the file (and line);
    `question`, where neither declared nor in the file, is empty."""
    fields: dict[str, list[object]] = {}
    names = batch.table.column_names
    for field in FAMILY_FIELDS[family]:
        column = columns.get(field, field)
        if field == "choices":
            fields[field] = list(_choices(batch, column))
        elif field == _OPTIONAL_TEXT and field not in columns and column not in names:
            fields[field] = [""] * batch.table.num_rows
        else:
            assert isinstance(column, str)  # config allows a list for choices alone
            fields[field] = list(_texts(batch, column, field))
    return fields
