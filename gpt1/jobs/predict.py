"""Score a table with a fine-tuned model (`gpt1 predict`, stage `predict@<task>`): the input's
rows, streamed in batches, each with the model's prediction appended.

The input is a CSV, TSV, JSON Lines or Parquet file (`gpt1.downstream.tables`) holding the
texts of the model's family under the columns its task declared (`tasks.<name>.table.columns`),
or under the family's own field names (as ingest's tables name them). The output, in the
format of its extension, is every input column followed by
- `prediction`: the label (classification, entailment, similarity with labels), the score
  (similarity regression), or the index from 0 of the chosen candidate (multiple choice);
- `prediction_text` (multiple choice): the chosen candidate itself;
- `probability_<label>` per label, or `probability_<k>` per candidate: the softmax.
Rows are scored as the fine-tuning stage scores its dev split
(`gpt1.training.finetune_loop.predict`), so the same rows get the same predictions. """

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from pydantic import TypeAdapter, ValidationError

from gpt1.atomic import atomic_file
from gpt1.config import Device, Precision
from gpt1.corpus.text import TextCleaner
from gpt1.downstream.standalone import Finetuned, TaskCard, load_finetuned
from gpt1.downstream.tables import (
    TableBatch,
    iter_batches,
    select_fields,
    table_columns,
    table_format,
)
from gpt1.downstream.transforms import encode_examples
from gpt1.errors import InputError
from gpt1.progress import StepProgress
from gpt1.training.device import Placement, inference_dtype, placement
from gpt1.training.finetune_loop import predict

log = logging.getLogger(__name__)

PREDICTION = "prediction"
BATCH_ROWS = 1024  # rows read, cleaned and encoded at a time: memory is bounded by this


def input_columns(card: TaskCard, header: list[str]) -> dict[str, str | list[str]]:
    """Which column of a file with columns `header` feeds each field the task declared a column
    for: that column, or, where the file lacks it but has the field's own name (as ingest's
    tables name it), that one. Other fields are `select_fields`' to find (or to say what is
    missing)."""
    declared = card.spec.table.columns if card.spec.table is not None else {}
    chosen: dict[str, str | list[str]] = {}
    for field, named in declared.items():
        present = set(named) <= set(header) if isinstance(named, list) else named in header
        chosen[field] = named if present or field not in header else field
    return chosen


def _softmax(outputs: np.ndarray) -> np.ndarray:
    shifted = np.exp(outputs - outputs.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


def prediction_columns(card: TaskCard, texts: dict[str, list[object]],
                       outputs: np.ndarray) -> dict[str, pa.Array]:
    """The columns appended to a batch of rows whose head `outputs` are (N, width)."""
    spec = card.spec
    if spec.regression:
        return {PREDICTION: pa.array(outputs[:, 0].astype(np.float64))}
    chosen = outputs.argmax(axis=1)
    probabilities = _softmax(outputs.astype(np.float64))
    if spec.labels is not None:
        columns = {PREDICTION: pa.array([spec.labels[i] for i in chosen], pa.string())}
        names = spec.labels
    else:  # multiple choice: the index of the chosen candidate, and the candidate
        choices = texts["choices"]
        columns = {PREDICTION: pa.array(chosen.astype(np.int64)),
                   f"{PREDICTION}_text": pa.array([row[i] for row, i in zip(
                       choices, chosen, strict=True)], pa.string())}
        names = [str(k) for k in range(outputs.shape[1])]
    for k, name in enumerate(names):
        columns[f"probability_{name}"] = pa.array(probabilities[:, k])
    return columns


def _no_predictions(card: TaskCard, source: Path, fmt: str, header: list[str]) -> pa.Table:
    """The table of a file with no rows: its columns (a Parquet file's types; text elsewhere)
    and the prediction columns, empty. A multiple-choice task's probability columns, one per
    candidate, are left out: no row says how many candidates there are."""
    rows = (pq.read_schema(source).empty_table() if fmt == "parquet" else
            pa.table({name: pa.array([], pa.string()) for name in header}))
    width = (1 if card.spec.regression else
             len(card.spec.labels) if card.spec.labels is not None else 0)
    appended = prediction_columns(card, {"choices": []}, np.zeros((0, width), np.float32))
    for name, column in appended.items():
        rows = rows.append_column(name, column)
    return rows


def _family_table(texts: dict[str, list[object]]) -> pa.Table:
    return pa.table({name: pa.array(values, pa.list_(pa.string()) if name == "choices"
                                    else pa.string()) for name, values in texts.items()})


class _Writer:
    """Batches appended to one file, in the format its extension names (list columns, which
    CSV cannot hold, as JSON text there)."""

    def __init__(self, path: Path, fmt: str) -> None:
        self.path, self.fmt = path, fmt
        self._sink: pq.ParquetWriter | pacsv.CSVWriter | None = None
        self._schema: pa.Schema | None = None
        self._jsonl = path.open("w", encoding="utf-8") if fmt == "jsonl" else None

    def write(self, table: pa.Table) -> None:
        if self.fmt in ("csv", "tsv"):
            table = pa.table({name: pa.array([json.dumps(v) for v in column.to_pylist()])
                              if pa.types.is_list(column.type) else column
                              for name, column in zip(table.column_names, table.columns,
                                                      strict=True)})
        if self._schema is None:
            self._schema = table.schema
        else:  # a column null throughout one batch reads as type null: cast to the first's
            table = table.cast(self._schema)
        if self._jsonl is not None:
            for row in table.to_pylist():
                self._jsonl.write(json.dumps(row, ensure_ascii=False) + "\n")
            return
        if self._sink is None:
            self._sink = (pq.ParquetWriter(self.path, self._schema) if self.fmt == "parquet" else
                          pacsv.CSVWriter(self.path, self._schema, write_options=pacsv.WriteOptions(
                              delimiter="\t" if self.fmt == "tsv" else ",")))
        self._sink.write_table(table)

    def close(self) -> None:
        if self._jsonl is not None:
            self._jsonl.close()
        elif self._sink is not None:
            self._sink.close()


@contextmanager
def _writer(out: Path, fmt: str) -> Iterator[_Writer]:
    """A writer of `out`, replaced atomically once every batch is written: an error midway
    leaves the file that was there."""
    with atomic_file(out) as tmp:
        writer = _Writer(tmp, fmt)
        try:
            yield writer
        finally:
            writer.close()


def _placement(device: str, precision: str, native_bf16_only: bool) -> Placement:
    """Where to compute, from the `device` and `precision` named as params.yaml names them;
    with `native_bf16_only`, bf16 on a CPU that would emulate it refused (`inference_dtype`)."""
    for option, kind, value in (("device", Device, device), ("precision", Precision, precision)):
        try:
            TypeAdapter(kind).validate_python(value)
        except ValidationError as err:
            message = err.errors()[0]["msg"].removeprefix("Value error, ")
            raise InputError(f"--{option} {value!r}: {message}") from None
    place = placement(device, precision)
    if native_bf16_only:
        return Placement(place.device, inference_dtype(precision, place.device, "--precision"))
    return place


def _row_position(where: str) -> int:
    """The line (or Parquet row) a row's `where` names: how far through the file it is."""
    found = re.search(r"(\d+)$", where)
    return int(found[1]) if found else 0


def _file_length(path: Path, fmt: str) -> int:
    """Lines of a text file, rows of a Parquet file: the progress bar's total."""
    if fmt == "parquet":
        return pq.ParquetFile(path).metadata.num_rows
    lines, last = 0, b"\n"
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 22):
            lines += chunk.count(b"\n")
            last = chunk[-1:]
    return lines + (last != b"\n")


def predict_file(model_dir: Path, source: Path, out: Path, source_format: str | None = None,
                 out_format: str | None = None, batch_size: int = 32, device: str = "auto",
                 precision: str = "fp32", batch_rows: int = BATCH_ROWS,
                 native_bf16_only: bool = False, cleaner: TextCleaner | None = None,
                 format_option: str | None = None) -> int:
    """Write `out`: every row of `source` with the prediction of the fine-tuned model in
    `model_dir`; returns the rows written. Bad input (the model folder, the file, a column, a
    row) is an InputError naming it, and `out` is left as it was. With `native_bf16_only`
    (`gpt1 predict`'s rule), `precision` bf16 on a CPU that would emulate it is bad input.
    The texts are cleaned by `cleaner`, a `TextCleaner` unless given (one that returns its
    text for a file cleaned already). `format_option` is how the caller names `source`'s
    format, for the message where its extension does not tell (None: it cannot)."""
    model = load_finetuned(model_dir)
    fmt = table_format(source, source_format, format_option)
    out_fmt = table_format(out, out_format, None)
    header = table_columns(source, fmt)
    if clash := sorted(name for name in header
                       if name == PREDICTION or name.startswith((f"{PREDICTION}_",
                                                                  "probability_"))):
        raise InputError(f"{source}: columns {clash} would be overwritten by the prediction "
                         "columns predict writes: rename them")
    columns = input_columns(model.card, header)
    place = _placement(device, precision, native_bf16_only)
    log.info("%s: %s model %r (%s) on %s, predicting %s -> %s", model_dir, model.card.spec.family,
             model.card.task, ", ".join(f"{k}: {v}" for k, v in columns.items()),
             place.device, source, out)
    rows, cleaner = 0, TextCleaner() if cleaner is None else cleaner
    cut: list[int] = []  # the uncut lengths of the rows cut to fit the context
    total = _file_length(source, fmt)
    with _writer(out, out_fmt) as writer, StepProgress(
            "predict", total, log_every=max(total // 20, 1), logger=log) as progress:
        for batch in iter_batches(source, fmt, batch_rows):
            table, lengths = _predicted(model, batch, columns, cleaner, batch_size, place)
            writer.write(table)
            cut.extend(lengths[lengths > model.card.n_ctx].tolist())
            rows += batch.table.num_rows
            if batch.where:
                progress.update(_row_position(batch.where[-1]), rows=rows)
        if rows == 0:  # a header and no rows: still a file that reads, with every column
            writer.write(_no_predictions(model.card, source, fmt, header))
    log.info("%s: %d rows predicted; %d longer than the model's context (n_ctx %d tokens), cut "
             "to fit%s", out, rows, len(cut), model.card.n_ctx,
             f" (median {np.median(cut):.0f} tokens)" if cut else "")
    return rows


def _predicted(model: Finetuned, batch: TableBatch, columns: dict[str, str | list[str]],
               cleaner: TextCleaner, batch_size: int, place: Placement
               ) -> tuple[pa.Table, np.ndarray]:
    """The batch with its predictions, and each row's length uncut (`Encoded.lengths`)."""
    texts = select_fields(batch, model.card.spec.family, columns)
    encoded = encode_examples(model.card.spec, _family_table(texts), model.tokenizer, cleaner,
                              model.card.n_ctx)
    outputs = predict(model.model, encoded.examples, model.tokenizer.pad_id, batch_size,
                      place.device, place.dtype)
    table = batch.table
    for name, values in prediction_columns(model.card, texts, outputs).items():
        table = table.append_column(name, values)
    return table, encoded.lengths

