"""Read each task's release files into its family's normalised table."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa

from gpt1.glue import parse_label, read_tsv
from gpt1.registry import Split, TaskSpec, task_spec

CLASSIFICATION_SCHEMA = pa.schema(
    [("idx", pa.int64()), ("text", pa.string()), ("label", pa.int64())]
)


def _glue_test_table(path: Path) -> pa.Table:
    """A GLUE single-sentence test file: header, then `index<TAB>sentence`, no labels."""
    rows = read_tsv(path, columns=2, header=True)
    return pa.table({"idx": [int(r[0]) for r in rows], "text": [r[1] for r in rows],
                     "label": pa.nulls(len(rows), pa.int64())}, schema=CLASSIFICATION_SCHEMA)


def _labelled_table(spec: TaskSpec, path: Path, rows: list[list[str]], text_col: int,
                    label_col: int, first_line: int) -> pa.Table:
    return pa.table({"idx": list(range(len(rows))), "text": [r[text_col] for r in rows],
                     "label": [parse_label(path, first_line + i, r[label_col], spec.labels)
                               for i, r in enumerate(rows)]}, schema=CLASSIFICATION_SCHEMA)


def _read_sst2(spec: TaskSpec, path: Path, split: Split) -> pa.Table:
    if split == "test":
        return _glue_test_table(path)
    rows = read_tsv(path, columns=2, header=True)  # sentence, label
    return _labelled_table(spec, path, rows, text_col=0, label_col=1, first_line=2)


def _read_cola(spec: TaskSpec, path: Path, split: Split) -> pa.Table:
    if split == "test":  # the only CoLA file with a header
        return _glue_test_table(path)
    rows = read_tsv(path, columns=4, header=False)  # source, label, author's mark, sentence
    return _labelled_table(spec, path, rows, text_col=3, label_col=1, first_line=1)


READERS: dict[str, Callable[[TaskSpec, Path, Split], pa.Table]] = {
    "sst2": _read_sst2,
    "cola": _read_cola,
}


def read_task_split(name: str, root: Path, split: Split) -> pa.Table:
    """Read one split of task `name` from the data root `root` into its family's schema."""
    spec = task_spec(name)
    path = root / spec.files[split]
    if not path.is_file():
        raise FileNotFoundError(f"task {name}: {split} split expected at {path}, not found")
    return READERS[name](spec, path, split)
