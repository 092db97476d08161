"""The task families of paper §3.3, one registered object each: everything a registry task's
`family` (`params.yaml` `tasks`) implies, from the table its reader fills to its predictions.

A family holds
- its table (`schema`): `idx`, the columns of its texts, `label`; the columns are what every
  reader of the family fills (`new_columns`);
- its input transformation (`layouts`): each sequence an example becomes, the special tokens
  `<start>`, `<delim>` and `<classify>` around the texts, as `gpt1.downstream.transforms`
  applies it;
- its head: how many outputs (`n_outputs`), how many sequences an example is
  (`sequences_per_example`), how the head reads their last, `<classify>`, states (`read_out`);
- its targets: the `label` column as class indices or scores (`targets`), and the prediction
  that head outputs make (`predictions`).

A task of a family with `scores` (similarity) and without labels is a regression
(`TaskParams.regression`: STS-B): its label is a score, its head has one output, and that output
is its prediction.

`gpt1.config.Family` lists the names of `FAMILIES`, which `params.yaml` is validated against: a
new family is one object here and its name there. Config cannot import this module: every stage
imports config, so each would depend on this file.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from gpt1.config import Family, TaskParams

if TYPE_CHECKING:
    from torch import Tensor

# the release's own index where it has one (GLUE test), else the row
_IDX = pa.field("idx", pa.int64())
# an index into the task's labels, or into the example's choices (null where unlabelled)
_CLASS = pa.field("label", pa.int64())
_SCORE = pa.field("label", pa.float64())  # a regression target (STS-B's 0-5 similarity)


def _texts(*names: str) -> tuple[pa.Field, ...]:
    return tuple(pa.field(name, pa.string()) for name in names)


@dataclass(frozen=True)
class TaskFamily:
    """A family whose examples are each read as the same sequences (`layouts`); the head reads
    the sum of their last states: per example, logits over the task's labels, or one score."""

    name: Family
    columns: tuple[pa.Field, ...]  # the table's columns between `idx` and `label`: the texts
    # each sequence of an example, in order: special tokens and the names of the columns whose
    # texts go there (a list column's name: the one candidate the sequence is for)
    layouts: tuple[str, ...]
    scores: bool = False  # a task may have a score for label (labels: null) and be a regression

    def schema(self, task: TaskParams) -> pa.Schema:
        """The table every split of `task` is read into; its label is a score for a regression."""
        return pa.schema([_IDX, *self.columns, _SCORE if task.regression else _CLASS])

    def new_columns(self) -> dict[str, list[object]]:
        """Empty columns, named as in the schema, for a reader to fill row by row: the texts
        and `label` (`idx` is the reader's to add where the file has its own index)."""
        return {**{column.name: [] for column in self.columns}, "label": []}

    def n_outputs(self, task: TaskParams) -> int:
        """Outputs of the task's linear head: one per label, or one score (regression)."""
        if task.regression:
            return 1
        assert task.labels is not None  # TaskParams guarantees labels outside regression
        return len(task.labels)

    def check_outputs(self, n_outputs: int) -> None:
        """Raise ValueError where a head of `n_outputs` cannot serve the family (here, any
        can: the task's labels set the count)."""

    def sequences_per_example(self, examples: list[list[list[int]]]) -> int:
        """m, the number of sequences of every example, checked against the family's."""
        counts = sorted({len(e) for e in examples})
        if counts == [len(self.layouts)]:
            return counts[0]
        raise ValueError(f"a {self.name} example is {len(self.layouts)} sequence(s); these have "
                         f"{counts}")

    def read_out(self, last: Tensor, per_example: int,
                 head: Callable[[Tensor], Tensor]) -> Tensor:
        """The (B, n_outputs) outputs of B examples from the last states (B·m, d) of their m
        sequences, each example's consecutive: `head` on the sum of each example's states
        (for similarity, both orders' states added element-wise)."""
        return head(last.view(-1, per_example, last.shape[-1]).sum(dim=1))

    def output_width(self, n_outputs: int, per_example: int) -> int:
        """Columns of the outputs `read_out` gives for examples of `per_example` sequences."""
        return n_outputs

    def targets(self, task: TaskParams, table: pa.Table) -> np.ndarray:
        """The `label` column: int64 class (or answer) indices, or float32 scores (regression)."""
        labels = table.column("label")
        if labels.null_count:
            raise ValueError(f"{labels.null_count} of {len(labels)} examples have no label")
        return labels.to_numpy().astype(np.float32 if task.regression else np.int64)

    def predictions(self, task: TaskParams, outputs: np.ndarray) -> np.ndarray:
        """Predictions from (N, ·) head outputs: the score (regression), else the index of the
        largest output, a label's (or the chosen answer's)."""
        return outputs[:, 0] if task.regression else outputs.argmax(axis=1)


@dataclass(frozen=True)
class ChoiceFamily(TaskFamily):
    """A family whose examples hold a list of candidate answers (a list column of texts): an
    example is read once per candidate, that candidate in the list's place, and the head gives
    one scalar per sequence, the logits of a softmax over the example's candidates. Its label
    is the index of the right one, so its tasks have no labels."""

    def n_outputs(self, task: TaskParams) -> int:
        """One scalar per choice."""
        return 1

    def check_outputs(self, n_outputs: int) -> None:
        if n_outputs != 1:
            raise ValueError(f"a multiple-choice head has 1 output per choice, not {n_outputs}")

    def sequences_per_example(self, examples: list[list[list[int]]]) -> int:
        """m, the number of choices, which every example must have."""
        counts = sorted({len(e) for e in examples})
        if len(counts) == 1 and counts[0] > 0:
            return counts[0]
        raise ValueError("a multiple-choice task needs the same number of choices in every "
                         f"example; these have {counts}")

    def read_out(self, last: Tensor, per_example: int,
                 head: Callable[[Tensor], Tensor]) -> Tensor:
        """The (B, m) outputs of B examples of m choices: `head` on each sequence's last state,
        one scalar per choice."""
        return head(last).view(-1, per_example)

    def output_width(self, n_outputs: int, per_example: int) -> int:
        """One column per choice."""
        return per_example


FAMILIES: dict[Family, TaskFamily] = {
    family.name: family for family in [
        TaskFamily("classification", _texts("text"), ("<start> text <classify>",)),
        TaskFamily("entailment", _texts("premise", "hypothesis"),
                   ("<start> premise <delim> hypothesis <classify>",)),
        # both orders, added in the head: the texts of a pair have no order
        TaskFamily("similarity", _texts("text_a", "text_b"),
                   ("<start> text_a <delim> text_b <classify>",
                    "<start> text_b <delim> text_a <classify>"), scores=True),
        # the answer is the index of the right one among `choices`; Story Cloze has no question
        ChoiceFamily("multiple_choice",
                     (*_texts("context", "question"), pa.field("choices", pa.list_(pa.string()))),
                     ("<start> context question <delim> choices <classify>",)),
    ]
}


def family_of(task: TaskParams) -> TaskFamily:
    """The family of a registry task."""
    return FAMILIES[task.family]
