"""The fine-tuning tasks: where each one's data lives, how to read it, how to score it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pyarrow as pa

from gpt1.glue import parse_label, read_tsv

Split = Literal["train", "dev", "test"]
SPLITS: tuple[Split, ...] = ("train", "dev", "test")
Family = Literal["classification", "entailment", "similarity", "multiple_choice"]

CLASSIFICATION_SCHEMA = pa.schema(
    [("idx", pa.int64()), ("text", pa.string()), ("label", pa.int64())]
)


@dataclass(frozen=True)
class TaskSpec:
    """One task of the paper: its data files, reader, labels, metric and the paper's figure."""

    name: str
    title: str
    family: Family
    files: dict[Split, str]  # relative to the data root
    labels: tuple[str, ...]
    metric: str
    paper_score: float  # the paper's Table 2-4 figure for `metric`, in percent
    read: Callable[[TaskSpec, Path, Split], pa.Table]


def _read_sst2(spec: TaskSpec, path: Path, split: Split) -> pa.Table:
    if split == "test":
        rows = read_tsv(path, columns=2, header=True)
        return pa.table(
            {
                "idx": [int(r[0]) for r in rows],
                "text": [r[1] for r in rows],
                "label": pa.nulls(len(rows), pa.int64()),
            },
            schema=CLASSIFICATION_SCHEMA,
        )
    rows = read_tsv(path, columns=2, header=True)
    return pa.table(
        {
            "idx": list(range(len(rows))),
            "text": [r[0] for r in rows],
            "label": [parse_label(path, i + 2, r[1], spec.labels) for i, r in enumerate(rows)],
        },
        schema=CLASSIFICATION_SCHEMA,
    )


TASKS: dict[str, TaskSpec] = {
    spec.name: spec
    for spec in (
        TaskSpec(
            name="sst2",
            title="SST-2",
            family="classification",
            files={"train": "glue/SST-2/train.tsv", "dev": "glue/SST-2/dev.tsv",
                   "test": "glue/SST-2/test.tsv"},
            labels=("0", "1"),
            metric="accuracy",
            paper_score=91.3,
            read=_read_sst2,
        ),
    )
}


def read_task_split(name: str, root: Path, split: Split) -> pa.Table:
    """Read one split of task `name` from the data root `root` into its family's schema."""
    spec = TASKS[name]
    path = root / spec.files[split]
    if not path.is_file():
        raise FileNotFoundError(f"task {name}: {split} split expected at {path}, not found")
    return spec.read(spec, path, split)
