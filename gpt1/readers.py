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


def _read_sst2(spec: TaskSpec, path: Path, split: Split) -> pa.Table:
    rows = read_tsv(path, columns=2, header=True)
    if split == "test":  # index, sentence; no labels
        return pa.table({"idx": [int(r[0]) for r in rows], "text": [r[1] for r in rows],
                         "label": pa.nulls(len(rows), pa.int64())},
                        schema=CLASSIFICATION_SCHEMA)
    return pa.table({"idx": list(range(len(rows))), "text": [r[0] for r in rows],
                     "label": [parse_label(path, i + 2, r[1], spec.labels)
                               for i, r in enumerate(rows)]},
                    schema=CLASSIFICATION_SCHEMA)


def _read_cola(spec: TaskSpec, path: Path, split: Split) -> pa.Table:
    if split == "test":  # the only CoLA file with a header: index, sentence
        rows = read_tsv(path, columns=2, header=True)
        return pa.table({"idx": [int(r[0]) for r in rows], "text": [r[1] for r in rows],
                         "label": pa.nulls(len(rows), pa.int64())},
                        schema=CLASSIFICATION_SCHEMA)
    # train/dev: no header; source, label, the author's mark, sentence
    rows = read_tsv(path, columns=4, header=False)
    return pa.table({"idx": list(range(len(rows))), "text": [r[3] for r in rows],
                     "label": [parse_label(path, i + 1, r[1], spec.labels)
                               for i, r in enumerate(rows)]},
                    schema=CLASSIFICATION_SCHEMA)


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
