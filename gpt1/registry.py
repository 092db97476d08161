"""The fine-tuning tasks: where each one's data lives, its family, labels, metric and the paper's
figure. (How each is read lives in `gpt1.readers`, so that only ingest depends on it.)"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Split = Literal["train", "dev", "test"]
SPLITS: tuple[Split, ...] = ("train", "dev", "test")
Family = Literal["classification", "entailment", "similarity", "multiple_choice"]


@dataclass(frozen=True)
class TaskSpec:
    name: str
    title: str
    family: Family
    files: dict[Split, str]  # relative to the data root
    labels: tuple[str, ...]
    metric: str
    paper_score: float  # the paper's figure for `metric` (Tables 2 and 3), in percent


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
        ),
        TaskSpec(
            name="cola",
            title="CoLA",
            family="classification",
            files={"train": "glue/CoLA/train.tsv", "dev": "glue/CoLA/dev.tsv",
                   "test": "glue/CoLA/test.tsv"},
            labels=("0", "1"),
            metric="mcc",
            paper_score=45.4,
        ),
    )
}


def task_spec(name: str) -> TaskSpec:
    """The spec of task `name`, or a ValueError listing the known tasks."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r} in finetune.tasks; known: {sorted(TASKS)}")
    return TASKS[name]
