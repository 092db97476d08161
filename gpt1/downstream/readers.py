"""Read each task's release files into its family's normalised table (`gpt1.downstream.families`).

A registry entry names its reader (`tasks.<name>.reader` in `params.yaml`); the reader turns
one release file (or, for RACE, one folder of articles) into the columns of the task's family
(`TaskFamily.new_columns`); `read_task_split` concatenates a split's files into one table.
Labels become indices into the task's `labels`; splits without labels (GLUE test files) get
null labels.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from gpt1.config import Family, TaskParams
from gpt1.downstream.families import family_of
from gpt1.downstream.glue import (
    DataFormatError,
    parse_index,
    parse_label,
    parse_score,
    read_csv_with_header,
    read_tsv,
    read_tsv_with_header,
    utf8_errors,
)
from gpt1.errors import InputError, MissingInputError

log = logging.getLogger(__name__)

# One file's rows, column by column, named as in the family's schema. `idx` is there only where
# the file has its own index column; `read_task_split` numbers the other rows.
Columns = dict[str, list[object]]
ReadFile = Callable[[TaskParams, Path], Columns]


@dataclass(frozen=True)
class Reader:
    """What a registry `reader` name stands for: a function reading one file (or RACE folder)
    into the columns of `family`, and, for a release whose label is a score, the score's range
    as the release defines it."""

    family: Family
    read: ReadFile
    scores: tuple[float, float] | None = None


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


# GLUE's columns go to premise / hypothesis (text_a / text_b) in the file's order, as the GLUE
# baselines and BERT's processors pair them: for QNLI the question is the premise and the
# sentence that may answer it the hypothesis.
READERS: dict[str, Reader] = {
    "glue_cola": Reader("classification", _read_cola),
    "glue_sst2": Reader("classification", _read_single_sentence),
    "nli_jsonl": Reader("entailment", _read_nli_jsonl),
    # MultiNLI's train file is reported to hold pairs with an empty sentence2
    "glue_mnli": Reader("entailment", _glue_tsv({"premise": "sentence1",
                                                 "hypothesis": "sentence2"}, label="gold_label",
                                                empty_texts=True)),
    "glue_qnli": Reader("entailment", _glue_tsv({"premise": "question", "hypothesis": "sentence"},
                                                label="label")),
    "glue_rte": Reader("entailment", _glue_tsv({"premise": "sentence1", "hypothesis": "sentence2"},
                                               label="label")),
    "scitail_tsv": Reader("entailment", _read_scitail),
    "glue_mrpc": Reader("similarity", _glue_tsv({"text_a": "#1 String", "text_b": "#2 String"},
                                                label="Quality")),
    # QQP's `id` (a pair id in train and dev, 0.. in test) is the file's own index; its train
    # file has two pairs with an empty question2
    "glue_qqp": Reader("similarity", _glue_tsv({"text_a": "question1", "text_b": "question2"},
                                               label="is_duplicate", index="id",
                                               empty_texts=True)),
    # "a similarity score between 0 and 5" (the STS Benchmark's readme.txt)
    "glue_stsb": Reader("similarity", _glue_tsv({"text_a": "sentence1", "text_b": "sentence2"},
                                                label="score"), scores=(0.0, 5.0)),
    "story_cloze_csv": Reader("multiple_choice", _read_story_cloze),
    "race_json": Reader("multiple_choice", _read_race),
}


# -- splits --------------------------------------------------------------------------------------


def _reader(task: TaskParams) -> Reader:
    reader = READERS.get(task.reader)
    if reader is None:
        raise InputError(f"{task.title}: unknown reader {task.reader!r} (readers: "
                         f"{sorted(READERS)})")
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
    when the task can run."""
    return [path for split in task.files for path in _split_files(task, root, split)
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
        columns = reader.read(task, path)
        rows = len(columns["label"])
        if not rows:
            raise DataFormatError(f"{path}: no rows to read into {task.title}'s {split} split")
        columns.setdefault("idx", list(range(start, start + rows)))
        tables.append(pa.table(columns, schema=schema))
        start += rows
    table = pa.concat_tables(tables)
    if not split.startswith("test") and table.column("label").null_count:
        raise DataFormatError(f"{task.title}: {', '.join(map(str, paths))}: rows without a "
                              f"label in the {split} split (only test splits may lack them)")
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
