"""Read each task's release files into its family's normalised table (`gpt1.downstream.families`).

A registry entry names its reader (`tasks.<name>.reader` in `params.yaml`); the reader turns
one release file (or, for RACE, one folder of articles) into the columns of the task's family
(`TaskFamily.new_columns`); `read_task_split` concatenates a split's files into one table.
Labels become indices into the task's `labels`; splits without labels (GLUE test files) get
null labels. The `table` reader reads ordinary tables (`gpt1.downstream.tables`) for a task of
any family, as its `table` section says.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from gpt1.config import PREDICT_SPLIT, TABLE_READER, Family, TableParams, TaskParams
from gpt1.downstream.families import family_of
from gpt1.downstream.glue import (
    missing,
    parse_index,
    parse_label,
    parse_score,
    read_csv_with_header,
    read_tsv,
    read_tsv_with_header,
)
from gpt1.downstream.tables import TableBatch, column_texts, iter_batches, select_fields
from gpt1.errors import DataFormatError, InputError, MissingInputError, utf8_errors

log = logging.getLogger(__name__)

# One file's rows, column by column, named as in the family's schema. `idx` is there only where
# the file has its own index column; `read_task_split` numbers the other rows.
Columns = dict[str, list[object]]
ReadFile = Callable[[TaskParams, Path, str], Columns]  # (task, path, split): the split's rows


@dataclass(frozen=True)
class Reader:
    """What a registry `reader` name stands for: a function reading the rows of a split from
    one file (or RACE folder) into the columns of `family` (None: of the task's family, whichever
    it is), and, for a release whose label is a score, the score's range as the release defines
    it."""

    family: Family | None
    read: ReadFile
    scores: tuple[float, float] | None = None


def _release(family: Family, read: Callable[[TaskParams, Path], Columns],
             scores: tuple[float, float] | None = None) -> Reader:
    """The reader of a release whose every file holds one split."""
    return Reader(family, lambda task, path, _split: read(task, path), scores)


def _labelled(split: str) -> bool:
    """Whether the rows of `split` must have labels: all but test and predict splits'."""
    return not (split.startswith("test") or split == PREDICT_SPLIT)


def _label(task: TaskParams, where: str, value: str) -> int | float:
    if task.regression:
        scores = READERS[task.reader].scores
        assert scores is not None  # _reader pairs regression tasks with score readers
        return parse_score(where, value, *scores)
    assert task.labels is not None  # TaskParams guarantees labels outside regression
    return parse_label(where, value, task.labels)


def _text(where: str, name: str, value: str) -> str:
    """A text field of a release that has no empty ones: empty, the row is damaged (a shifted
    column, a cut line)."""
    if not value.strip():
        raise DataFormatError(f"{where}: {name!r} is empty (the release has no empty texts)")
    return value


# -- GLUE: a header names the columns; test files lack the label column -------------------------


def _glue_tsv(texts: dict[str, str], label: str, index: str = "index",
              empty_texts: bool = False) -> ReadFile:
    """A reader of GLUE TSVs with a header line: the schema columns `texts` (schema name ->
    header name), the label from column `label` where the file has it, `idx` from column `index`
    where the file has it (a number from 0, each once). Columns are found by name, so extra
    columns (MNLI's parses, STS-B's genre and year) and their order do not matter. An empty
    text is an error unless the release has some (`empty_texts`)."""

    def read(task: TaskParams, path: Path) -> Columns:
        header, rows = read_tsv_with_header(path)
        text_at = {column: header.require(name) for column, name in texts.items()}
        label_at, index_at = header.find(label), header.find(index)
        columns = family_of(task).new_columns()
        if index_at is not None:
            columns["idx"] = []
        index_lines: dict[int, int] = {}
        for line, fields in rows:
            where = f"{path}:{line}"
            for column, at in text_at.items():
                columns[column].append(fields[at] if empty_texts
                                       else _text(where, texts[column], fields[at]))
            columns["label"].append(None if label_at is None
                                    else _label(task, where, fields[label_at]))
            if index_at is not None:
                idx = parse_index(where, fields[index_at])
                if idx in index_lines:
                    raise DataFormatError(f"{where}: index {idx} again (first on line "
                                          f"{index_lines[idx]})")
                index_lines[idx] = line
                columns["idx"].append(idx)
        return columns

    return read


_read_single_sentence = _glue_tsv({"text": "sentence"}, label="label")


def _starts_with_header(path: Path, first_column: str) -> bool:
    with path.open(encoding="utf-8-sig") as fh, utf8_errors(path):
        return fh.readline().split("\t", 1)[0].strip() == first_column


def _read_cola(task: TaskParams, path: Path) -> Columns:
    """CoLA train and dev have no header: source, label, the author's mark (`*`), sentence.
    Only the test file has a header (index, sentence), and no labels."""
    if _starts_with_header(path, "index"):
        return _read_single_sentence(task, path)
    columns = family_of(task).new_columns()
    for line, (_, label, _, sentence) in read_tsv(path, columns=4):
        where = f"{path}:{line}"
        columns["text"].append(_text(where, "sentence", sentence))
        columns["label"].append(_label(task, where, label))
    return columns


# -- SciTail TSV and SNLI / MultiNLI JSON lines --------------------------------------------------


def _read_scitail(task: TaskParams, path: Path) -> Columns:
    """SciTail's `tsv_format`: premise, hypothesis, label (entails / neutral), no header."""
    columns = family_of(task).new_columns()
    for line, (premise, hypothesis, label) in read_tsv(path, columns=3):
        columns["premise"].append(premise)
        columns["hypothesis"].append(hypothesis)
        columns["label"].append(_label(task, f"{path}:{line}", label))
    return columns


def _string(where: str, record: object, key: str) -> str:
    if isinstance(record, dict) and key not in record:
        raise missing(where, key, list(record), "key")
    value = record.get(key) if isinstance(record, dict) else None
    if not isinstance(value, str):
        raise DataFormatError(f"{where}: key {key!r}: expected a string, got {value!r}")
    return value


def _read_nli_jsonl(task: TaskParams, path: Path) -> Columns:
    """SNLI / MultiNLI `.jsonl`: one JSON object a line with sentence1 (the premise), sentence2
    (the hypothesis) and gold_label. Pairs whose annotators reached no consensus (gold_label
    `-`) have no label and are dropped, as is standard."""
    columns = family_of(task).new_columns()
    dropped = 0
    with path.open(encoding="utf-8-sig") as fh, utf8_errors(path):
        for line, text in enumerate(fh, start=1):
            if not text.strip():
                continue
            where = f"{path}:{line}"
            try:
                record = json.loads(text)
            except json.JSONDecodeError as err:
                raise DataFormatError(f"{where}: not a JSON object: {err.msg}") from None
            gold = _string(where, record, "gold_label")
            if gold == "-":
                dropped += 1
                continue
            columns["premise"].append(_string(where, record, "sentence1"))
            columns["hypothesis"].append(_string(where, record, "sentence2"))
            columns["label"].append(_label(task, where, gold))
    log.info("%s: %d pairs read, %d without a gold label (-) dropped", path,
             len(columns["label"]), dropped)
    return columns


# -- multiple choice: Story Cloze CSV and RACE JSON ----------------------------------------------

_STORY = [f"InputSentence{i}" for i in range(1, 5)]
_ENDINGS = ["RandomFifthSentenceQuiz1", "RandomFifthSentenceQuiz2"]


def _read_story_cloze(task: TaskParams, path: Path) -> Columns:
    """Story Cloze 2016 CSV: the four sentences of a story (joined by spaces, as the original
    code does) are the context, the two candidate endings the choices, AnswerRightEnding (1 or
    2) the right one. There is no question."""
    header, rows = read_csv_with_header(path)
    story_at = {name: header.require(name) for name in _STORY}
    endings_at = {name: header.require(name) for name in _ENDINGS}
    answer_at = header.find("AnswerRightEnding")
    columns = family_of(task).new_columns()
    for line, fields in rows:
        where = f"{path}:{line}"
        story = [_text(where, name, fields[at]) for name, at in story_at.items()]
        columns["context"].append(" ".join(story))
        columns["question"].append("")
        columns["choices"].append([_text(where, name, fields[at])
                                   for name, at in endings_at.items()])
        columns["label"].append(None if answer_at is None
                                else parse_label(where, fields[answer_at], ["1", "2"]))
    return columns


_ANSWERS = "ABCD"


def _race_article(task: TaskParams, path: Path) -> Columns:
    """One RACE article file: JSON with the article and, item for item, its questions, their
    four options and the letters of the right ones. One row per question."""
    try:
        with utf8_errors(path):
            record = json.loads(path.read_text(encoding="utf-8-sig"))
    except json.JSONDecodeError as err:
        raise DataFormatError(f"{path}:{err.lineno}: not JSON: {err.msg}") from None
    article = _string(str(path), record, "article")
    items = [record.get(key) for key in ("questions", "options", "answers")]
    if (not all(isinstance(item, list) and item for item in items)
            or len({len(i) for i in items}) != 1):
        raise DataFormatError(f"{path}: keys 'questions', 'options' and 'answers' must be lists "
                              "of one length, not empty")
    questions, options, answers = items
    columns = family_of(task).new_columns()
    for k, (question, choices, answer) in enumerate(zip(questions, options, answers,
                                                        strict=True)):
        if not isinstance(question, str):
            raise DataFormatError(f"{path}: questions[{k}]: expected a string")
        if (not isinstance(choices, list) or len(choices) != len(_ANSWERS)
                or not all(isinstance(c, str) for c in choices)):
            raise DataFormatError(f"{path}: options[{k}]: expected {len(_ANSWERS)} strings")
        columns["context"].append(article)
        columns["question"].append(question)
        columns["choices"].append(choices)
        columns["label"].append(parse_label(f"{path}: answers[{k}]", answer, _ANSWERS))
    return columns


def _read_race(task: TaskParams, path: Path) -> Columns:
    """A folder of RACE articles (`*.txt`, each one JSON object), read in sorted name order."""
    files = sorted(path.glob("*.txt")) if path.is_dir() else [path]
    if not files:
        raise MissingInputError(f"{path}: no RACE article files (*.txt) in the folder")
    columns = family_of(task).new_columns()
    for file in files:
        for column, values in _race_article(task, file).items():
            columns[column].extend(values)
    return columns


# -- ordinary tables: `reader: table` -----------------------------------------------------------


def _split_rows(task: TaskParams, table: TableParams, batch: TableBatch,
                split: str) -> TableBatch:
    """The batch's rows of `split`: all of them, or, where one file holds several splits, those
    whose `table.split_column` holds the split's value. A value that is no split's is an error."""
    if table.split_column is None:
        return batch
    splits = {table.split_value(name): name for name in task.files}
    keep = []
    values = column_texts(batch, table.split_column, "split_column")
    for row, (where, value) in enumerate(zip(batch.where, values, strict=True)):
        value = (value or "").strip()
        if value not in splits:
            raise DataFormatError(f"{where}: {table.split_column} {value!r} is not one of "
                                  f"{list(splits)}, the values of the task's splits "
                                  "(table.split_values)")
        if splits[value] == split:
            keep.append(row)
    return batch.take(keep)


def _choice(where: str, value: str, table: TableParams, n_choices: int) -> int:
    """A multiple-choice label: the index of the right choice, from 0, or, where the choices
    are several columns, the name of the right one's column."""
    names = table.column("choices")
    if isinstance(names, list) and value in names:
        return names.index(value)
    if value.isascii() and value.isdigit() and int(value) < n_choices:
        return int(value)
    named = f" or its column's name ({', '.join(names)})" if isinstance(names, list) else ""
    raise DataFormatError(f"{where}: label {value!r} is not a choice: give its index from 0 to "
                          f"{n_choices - 1}{named}")


def _table_label(task: TaskParams, table: TableParams, where: str, value: str,
                 n_choices: int) -> int | float:
    if task.regression:
        assert table.scores is not None  # config requires them of a regression
        return parse_score(where, value, *table.scores)
    if table.label_values is not None:
        values = list(table.label_values)
        value = table.label_values[values[parse_label(where, value, values)]]
    if task.family == "multiple_choice":
        return _choice(where, value, table, n_choices)
    assert task.labels is not None  # TaskParams guarantees labels outside regression
    return parse_label(where, value, task.labels)


def _table_labels(task: TaskParams, table: TableParams, batch: TableBatch, split: str,
                  choices: list[Any] | None) -> list[int | float | None]:
    """The batch's labels; a test or predict file may lack the column, or leave it empty."""
    column = table.column("label")
    assert isinstance(column, str)  # config allows a list for choices alone
    if column not in batch.table.column_names and not _labelled(split):
        return [None] * batch.table.num_rows
    labels: list[int | float | None] = []
    values = column_texts(batch, column, "label")
    for row, (where, value) in enumerate(zip(batch.where, values, strict=True)):
        if value is None or not value.strip():
            if _labelled(split):
                raise DataFormatError(f"{where}: column {column!r} (label) is empty")
            labels.append(None)
            continue
        n_choices = len(choices[row]) if choices else 0
        labels.append(_table_label(task, table, where, value.strip(), n_choices))
    return labels


def _same_number_of_choices(where: list[str], choices: list[Any]) -> None:
    """Every example of a multiple-choice task has as many choices: the head's softmax spans
    them."""
    counts = [len(row) for row in choices]
    for at, count in zip(where, counts, strict=True):
        if count != counts[0]:
            raise DataFormatError(f"{at}: {count} choices, where {where[0]} has {counts[0]}: "
                                  "every example needs as many")


def _read_table(task: TaskParams, path: Path, split: str) -> Columns:
    """The rows of `split` in one table file (CSV, TSV, JSON Lines, Parquet), the family's
    fields and the label read from the columns the task's `table` names. A label is one of the
    file's values (mapped through `table.label_values` where given) that is a label, a score
    within `table.scores` (a regression), or the right choice (`_choice`)."""
    table = task.table
    assert table is not None  # config: a table reader's task has its table section
    columns = family_of(task).new_columns()
    where: list[str] = []
    for batch in iter_batches(path, table.format):
        rows = _split_rows(task, table, batch, split)
        fields = select_fields(rows, task.family, table.columns)
        for name, values in fields.items():
            columns[name].extend(values)
        columns["label"].extend(_table_labels(task, table, rows, split, fields.get("choices")))
        where.extend(rows.where)
    if "choices" in columns:
        _same_number_of_choices(where, columns["choices"])
    return columns


# GLUE's columns go to premise / hypothesis (text_a / text_b) in the file's order, as the GLUE
# baselines and BERT's processors pair them: for QNLI the question is the premise and the
# sentence that may answer it the hypothesis.
READERS: dict[str, Reader] = {
    "glue_cola": _release("classification", _read_cola),
    "glue_sst2": _release("classification", _read_single_sentence),
    "nli_jsonl": _release("entailment", _read_nli_jsonl),
    # MultiNLI's train file is reported to hold pairs with an empty sentence2
    "glue_mnli": _release("entailment", _glue_tsv({"premise": "sentence1",
                                                   "hypothesis": "sentence2"},
                                                  label="gold_label", empty_texts=True)),
    "glue_qnli": _release("entailment", _glue_tsv({"premise": "question",
                                                   "hypothesis": "sentence"}, label="label")),
    "glue_rte": _release("entailment", _glue_tsv({"premise": "sentence1",
                                                  "hypothesis": "sentence2"}, label="label")),
    "scitail_tsv": _release("entailment", _read_scitail),
    "glue_mrpc": _release("similarity", _glue_tsv({"text_a": "#1 String",
                                                   "text_b": "#2 String"}, label="Quality")),
    # QQP's `id` (a pair id in train and dev, 0.. in test) is the file's own index; its train
    # file has two pairs with an empty question2
    "glue_qqp": _release("similarity", _glue_tsv({"text_a": "question1", "text_b": "question2"},
                                                 label="is_duplicate", index="id",
                                                 empty_texts=True)),
    # "a similarity score between 0 and 5" (the STS Benchmark's readme.txt)
    "glue_stsb": _release("similarity", _glue_tsv({"text_a": "sentence1",
                                                   "text_b": "sentence2"}, label="score"),
                          scores=(0.0, 5.0)),
    "story_cloze_csv": _release("multiple_choice", _read_story_cloze),
    "race_json": _release("multiple_choice", _read_race),
    # ordinary tables of any family, as the task's `table` section says
    TABLE_READER: Reader(None, _read_table),
}


# -- splits --------------------------------------------------------------------------------------


def _reader(task: TaskParams) -> Reader:
    reader = READERS.get(task.reader)
    if reader is None:
        raise InputError(f"{task.title}: unknown reader {task.reader!r} (readers: "
                         f"{sorted(READERS)})")
    if reader.family is None:  # the table reader: config checked its task's `table` fits
        return reader
    if reader.family != task.family:
        raise InputError(f"{task.title}: reader {task.reader!r} reads {reader.family} files, "
                         f"not {task.family}")
    if task.regression and reader.scores is None:
        raise InputError(f"{task.title}: reader {task.reader!r} reads class labels: give the "
                         "task its labels")
    if reader.scores is not None and not task.regression:
        raise InputError(f"{task.title}: reader {task.reader!r} reads scores, not labels "
                         f"{task.labels}: set labels to null")
    return reader


def split_paths(task: TaskParams, split: str) -> list[str]:
    """The file(s) of one split, relative to the data root."""
    files = task.files[split]
    return [files] if isinstance(files, str) else list(files)


def _split_files(task: TaskParams, root: Path, split: str) -> list[Path]:
    if split not in task.files:
        raise ValueError(f"{task.title}: no {split!r} split in its files {sorted(task.files)}")
    return [root / rel for rel in split_paths(task, split)]


def missing_files(task: TaskParams, root: Path) -> list[Path]:
    """The files (or RACE folders) of the task's splits that are missing under `root`: empty
    when the task can run (its `predict` file is not needed for that)."""
    return [path for split in task.data_splits for path in _split_files(task, root, split)
            if not path.exists()]


def read_task_split(task: TaskParams, root: Path, split: str) -> pa.Table:
    """One split of `task` (its release files under the data root `root`, concatenated) in the
    table of its family, `TaskFamily.schema(task)`. `idx` is the file's own index where it has
    one, else the row number across the split's files. Raises FileNotFoundError naming the
    missing files and DataFormatError naming the file and line (or key) of bad content, or a
    file without rows."""
    reader = _reader(task)
    paths = _split_files(task, root, split)
    missing = [str(path) for path in paths if not path.exists()]
    if missing:
        raise MissingInputError(f"{task.title}: {split} split expected at {', '.join(missing)}, "
                                "not found")
    schema = family_of(task).schema(task)
    tables = [schema.empty_table()]  # so that a split of no files is an empty table
    start = 0
    for path in paths:
        columns = reader.read(task, path, split)
        rows = len(columns["label"])
        if not rows:
            raise DataFormatError(f"{path}: no rows to read into {task.title}'s {split} split")
        columns.setdefault("idx", list(range(start, start + rows)))
        tables.append(pa.table(columns, schema=schema))
        start += rows
    table = pa.concat_tables(tables)
    if _labelled(split) and table.column("label").null_count:
        raise DataFormatError(f"{task.title}: {', '.join(map(str, paths))}: rows without a "
                              f"label in the {split} split (only test and predict splits may "
                              "lack them)")
    return table


def holdout_split(table: pa.Table, size: int, seed: int) -> tuple[pa.Table, pa.Table]:
    """(train, dev): `size` rows of `table` drawn out for dev as OpenAI's fine-tuning code draws
    Story Cloze's 374 dev stories out of the 1,871 of the validation file: scikit-learn's
    `train_test_split(..., test_size=size, random_state=seed)` of the rows in file order, each
    part in the order it returns."""
    # imported here: scikit-learn takes seconds to import, and only Story Cloze needs it
    from sklearn.model_selection import train_test_split

    train, dev = train_test_split(np.arange(table.num_rows), test_size=size, random_state=seed)
    return table.take(train), table.take(dev)
