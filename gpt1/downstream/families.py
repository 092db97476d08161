"""The task families of paper §3.3 and what a registry entry (`params.yaml` `tasks`) implies:
each family's normalised table, which every reader produces and fine-tuning consumes."""

from __future__ import annotations

import pyarrow as pa

from gpt1.config import Family, TaskParams

_IDX = ("idx", pa.int64())  # the release's own index where it has one (GLUE test), else the row
_CLASS = ("label", pa.int64())  # an index into the task's labels (null where unlabelled)
_SCORE = ("label", pa.float64())  # a regression target (STS-B's 0-5 similarity)

SCHEMAS: dict[Family, pa.Schema] = {
    "classification": pa.schema([_IDX, ("text", pa.string()), _CLASS]),
    "entailment": pa.schema([_IDX, ("premise", pa.string()), ("hypothesis", pa.string()),
                             _CLASS]),
    "similarity": pa.schema([_IDX, ("text_a", pa.string()), ("text_b", pa.string()), _CLASS]),
    # `label` is the index of the right answer among `choices`
    "multiple_choice": pa.schema([_IDX, ("context", pa.string()), ("question", pa.string()),
                                  ("choices", pa.list_(pa.string())), _CLASS]),
}
REGRESSION_SCHEMA = pa.schema([_IDX, ("text_a", pa.string()), ("text_b", pa.string()), _SCORE])


def task_schema(task: TaskParams) -> pa.Schema:
    """The table every split of `task` is read into."""
    return REGRESSION_SCHEMA if task.regression else SCHEMAS[task.family]


def n_outputs(task: TaskParams) -> int:
    """Outputs of the task's linear head: one per label, one score (regression), or one scalar
    per choice (multiple choice: the choices' scalars go through a softmax)."""
    if task.family == "multiple_choice" or task.regression:
        return 1
    assert task.labels is not None
    return len(task.labels)


def split_paths(task: TaskParams, split: str) -> list[str]:
    """The file(s) of one split, relative to the data root."""
    files = task.files[split]
    return [files] if isinstance(files, str) else list(files)
