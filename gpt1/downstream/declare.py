"""`gpt1 task add`: a registry entry for a task of the user's own over ordinary tables (`reader:
table`), made from its files and the names of a few columns. Its labels, metrics and dev split
are worked out from the train file and the family; the entry is checked by reading every split
before params.yaml is written (`gpt1.presets.edit.set_task`: comments kept)."""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import get_args

from gpt1.config import (
    PREDICT_SPLIT,
    TABLE_READER,
    Family,
    Params,
    TableFormat,
    TaskParams,
    is_split_name,
    load_params,
    parse_params,
    read_yaml,
)
from gpt1.data_root import check_data_root
from gpt1.downstream.readers import read_task_split
from gpt1.downstream.tables import column_texts, iter_batches
from gpt1.errors import LOOP, InputError, MissingInputError, broken_link
from gpt1.presets.edit import set_task

_NAME = re.compile(r"[A-Za-z0-9_]+")  # it names the task's folders and DVC stages
# more distinct values than this in a label column: more likely a text than the labels
MAX_LABELS = 100
HOLDOUT_SEED = 0


@dataclass(frozen=True)
class TaskSpec:
    """What `gpt1 task add` is told: the task's name and family, its files by split (paths as
    typed: relative to the working directory, or absolute), and how to read them."""

    name: str
    family: str
    files: dict[str, Path]
    columns: dict[str, str | list[str]] = field(default_factory=dict)  # field or label -> column
    format: str | None = None  # None: from each file's extension
    labels: list[str] | None = None  # None: the train split's label values, sorted
    label_map: dict[str, str] | None = None  # the file's values -> labels
    split_column: str | None = None  # the train file holds every split; this column says which
    split_values: dict[str, str] = field(default_factory=dict)  # split -> its value there
    scores: tuple[float, float] | None = None  # a similarity task's score range: a regression
    title: str | None = None  # None: the name
    holdout: int | None = None  # dev rows drawn out of train; None: a tenth, where no dev split

    @property
    def regression(self) -> bool:
        return self.family == "similarity" and self.scores is not None

    @property
    def train_value(self) -> str:
        """The value of `split_column` that marks the train rows."""
        return self.split_values.get("train", "train")


@dataclass(frozen=True)
class _Survey:
    """One pass over the train file: its rows per value of the split column (all under None
    without one), and the distinct values of its train rows' label column, where read."""

    rows: Counter[str | None]
    label_values: set[str]


def add_task(params_path: Path, spec: TaskSpec, force: bool = False) -> dict[str, object]:
    """Write task `spec` into `params_path` (`tasks.<name>`, and appended to a
    `finetune.tasks` list) once each of its splits reads; return the entry written. An
    existing task of that name is refused unless `force`."""
    params = load_params(params_path)
    _check_name(spec.name, params, params_path, force)
    root = data_root(params_path, params)
    check_data_root(root)
    entry = task_entry(spec, root, params_path)
    task = _validated(params_path, spec.name, entry)
    for split in task.files:
        read_task_split(task, root, split)
    # under params.yaml's lock, which refuses a task of that name added since _check_name
    set_task(params_path, spec.name, entry, replace=force)
    return entry


def data_root(params_path: Path, params: Params) -> Path:
    """`ingest.root`, which the stages read relative to the folder of params.yaml."""
    root = Path(params.ingest.root)
    return root if root.is_absolute() else params_path.parent / root


def task_entry(spec: TaskSpec, root: Path, params_path: Path) -> dict[str, object]:
    """The registry entry of `spec`, its file paths relative to the data root `root`."""
    family = _family(spec.family)
    if spec.format is not None and spec.format not in get_args(TableFormat):
        raise InputError(f"--format {spec.format!r}: one of {', '.join(get_args(TableFormat))}")
    files = _files(spec, root, params_path)
    survey = _survey(spec)
    if spec.split_column is not None:
        files = {split: files["train"] for split in _file_splits(spec, survey)}
    train_rows = survey.rows[spec.train_value if spec.split_column else None]
    labels = _labels(spec, survey)
    entry: dict[str, object] = {"title": spec.title or spec.name, "family": family,
                                "reader": TABLE_READER, "files": files,
                                "table": _table_section(spec)}
    holdout = _holdout(spec, files, train_rows)
    if holdout is not None:
        entry["holdout"] = holdout
    if labels is not None:
        entry["labels"] = labels
    entry["metrics"] = _metrics(family, spec.regression)
    entry["overrides"] = {}
    return entry


def _check_name(name: str, params: Params, params_path: Path, force: bool) -> None:
    if not _NAME.fullmatch(name) or name == "all":
        raise InputError(f"task name {name!r}: use letters, digits and _ (it names the task's "
                         "folders and DVC stages; `all` is finetune.tasks' word for every task)")
    if name in params.tasks and not force:
        raise InputError(f"tasks.{name} is already in {params_path}: choose another name, or "
                         "--force to replace it")


def _family(name: str) -> Family:
    for family in get_args(Family):
        if name == family:
            return family
    raise InputError(f"--family {name!r}: one of {', '.join(get_args(Family))}")


def _under_root(path: Path, flag: str, root: Path, params_path: Path) -> str:
    """`path` (as typed) relative to the data root, where it lies under it."""
    if not path.is_file():
        if (problem := broken_link(path)) is not None:
            missing = MissingInputError if problem != LOOP else InputError
            raise missing(f"{flag} {path}: {problem}")
        if not path.exists():
            raise MissingInputError(f"{flag} {path}: no such file")
        raise InputError(f"{flag} {path}: not a file")
    # as typed first (the root may be reached through a link), then with links resolved
    for file, base in ((Path(os.path.abspath(path)), Path(os.path.abspath(root))),
                       (path.resolve(), root.resolve())):
        if file.is_relative_to(base):
            return file.relative_to(base).as_posix()
    raise InputError(f"{flag} {path}: not under the data root {root} (ingest.root of "
                     f"{params_path}), the only place the pipeline reads task files from: move "
                     "or copy it there, or set ingest.root to a folder that holds it "
                     "(gpt1 set ingest.root=...)")


def _files(spec: TaskSpec, root: Path, params_path: Path) -> dict[str, str]:
    if spec.split_values and spec.split_column is None:
        raise InputError("--split-values: name the column that holds them (--split-column)")
    if spec.split_column is not None:
        other = next((split for split in spec.files if split != "train"), None)
        if other is not None:
            raise InputError(f"--{other}: with --split-column every split is read from the "
                             f"--train file (its column {spec.split_column!r} says which); drop "
                             f"--{other}")
    return {split: _under_root(path, f"--{split}", root, params_path)
            for split, path in spec.files.items()}


def _survey(spec: TaskSpec) -> _Survey:
    path = spec.files["train"]
    label = spec.columns.get("label", "label")
    read_labels = (spec.labels is None and spec.label_map is None and not spec.regression
                   and spec.family != "multiple_choice")
    assert isinstance(label, str)  # a list is for choices alone
    rows: Counter[str | None] = Counter()
    values: set[str] = set()
    for batch in iter_batches(path, spec.format):
        n = batch.table.num_rows
        splits = ([(v or "").strip() for v in column_texts(batch, spec.split_column, "split")]
                  if spec.split_column else [None] * n)
        labels = column_texts(batch, label, "label") if read_labels else [None] * n
        rows.update(splits)
        values.update(value.strip() for split, value in zip(splits, labels, strict=True)
                      if value is not None and value.strip()
                      and (split is None or split == spec.train_value))
    return _Survey(rows, values)


def _split_order(split: str) -> tuple[int, str]:
    return ({"train": 0, PREDICT_SPLIT: 3}.get(split, 1 if split.startswith("dev") else 2), split)


def _file_splits(spec: TaskSpec, survey: _Survey) -> list[str]:
    """The splits in the train file: those `split_values` names, and those of the split
    column's other values that are split names."""
    splits = set(spec.split_values)
    mapped = set(spec.split_values.values())
    for value in survey.rows:
        assert value is not None  # a split column was read
        if value in mapped:
            continue
        if not is_split_name(value) or value in splits:
            # a value named as a split that --split-values gave another value: map it to itself
            split = value if value in splits else "dev"
            raise InputError(f"--train {spec.files['train']}: column {spec.split_column!r} holds "
                             f"{value!r}, which is no split's value: map it with --split-values "
                             f"(e.g. {split}={value})")
        splits.add(value)
    return sorted(splits, key=_split_order)


def _sorted_values(values: set[str]) -> list[str]:
    """Numbers in numeric order (`2` before `10`), anything else in text order."""
    try:
        return sorted(values, key=float)
    except ValueError:
        return sorted(values)


def _labels(spec: TaskSpec, survey: _Survey) -> list[str] | None:
    if spec.labels is not None or spec.regression or spec.family == "multiple_choice":
        return spec.labels
    if spec.label_map is not None:
        return list(dict.fromkeys(spec.label_map.values()))
    found = _sorted_values(survey.label_values)
    column = spec.columns.get("label", "label")
    if not 2 <= len(found) <= MAX_LABELS:
        raise InputError(f"--train {spec.files['train']}: the train rows' label column "
                         f"{column!r} holds {len(found)} distinct value(s) "
                         f"{found[:5]}{'...' if len(found) > 5 else ''}: a classifier needs "
                         f"2 to {MAX_LABELS}; check --label-column, or give --labels or "
                         "--label-map")
    return found


def _table_section(spec: TaskSpec) -> dict[str, object]:
    table: dict[str, object] = {}
    if spec.format is not None:
        table["format"] = spec.format
    if spec.columns:
        table["columns"] = dict(spec.columns)
    if spec.label_map is not None:
        table["label_values"] = dict(spec.label_map)
    if spec.scores is not None:
        table["scores"] = list(spec.scores)
    if spec.split_column is not None:
        table["split_column"] = spec.split_column
    split_values = {split: value for split, value in spec.split_values.items() if split != value}
    if split_values:
        table["split_values"] = split_values
    return table


def _holdout(spec: TaskSpec, files: dict[str, str], train_rows: int) -> dict[str, int] | None:
    """Dev rows drawn out of train: `spec.holdout` of them, or a tenth (at least 1) for a task
    without a dev split."""
    if spec.holdout is None and any(split.startswith("dev") for split in files):
        return None
    size = spec.holdout or max(1, train_rows // 10)
    if size >= train_rows:
        raise InputError(f"--train {spec.files['train']}: {train_rows} train row(s), too few to "
                         f"hold {size} out for a dev split: give a --dev file")
    return {"size": size, "seed": HOLDOUT_SEED}


def _metrics(family: Family, regression: bool) -> list[str]:
    """Accuracy; for a similarity task F1 first (the paper's for MRPC and QQP), or Pearson and
    Spearman correlations for a regression (STS-B's)."""
    if regression:
        return ["pearson", "spearman"]
    return ["f1", "accuracy"] if family == "similarity" else ["accuracy"]


def _validated(params_path: Path, name: str, entry: dict[str, object]) -> TaskParams:
    """The entry as params.yaml's validation sees it, beside the file's other tasks."""
    raw = read_yaml(params_path.read_text(encoding="utf-8"))
    raw["tasks"][name] = entry
    return parse_params(raw, params_path).tasks[name]


# -- the command line's lists and mappings -------------------------------------------------------


def split_list(flag: str, text: str) -> list[str]:
    """`a,b` -> ["a", "b"] (a value of option `flag`, which an error names)."""
    items = [item.strip() for item in text.split(",")]
    if not all(items):
        raise InputError(f"{flag} {text!r}: expected a comma-separated list, e.g. a,b")
    return items


def split_pairs(flag: str, text: str) -> dict[str, str]:
    """`1=negative,5=positive` -> {"1": "negative", "5": "positive"}."""
    pairs: dict[str, str] = {}
    for item in split_list(flag, text):
        key, sep, value = (part.strip() for part in item.partition("="))
        if not sep or not key or not value or key in pairs:
            raise InputError(f"{flag} {text!r}: expected KEY=VALUE pairs, each key once, e.g. "
                             "1=negative,5=positive")
        pairs[key] = value
    return pairs


def parse_scores(text: str) -> tuple[float, float]:
    """`0,5` -> (0.0, 5.0): a score range, low < high."""
    try:
        low, high = (float(item) for item in split_list("--scores", text))
    except ValueError:
        low = high = 0.0
    if not low < high:
        raise InputError(f"--scores {text!r}: expected LOW,HIGH with LOW < HIGH, e.g. 0,5")
    return low, high
