"""A registry task's model: the pretrained trunk under the head its family reads
(`gpt1.model.heads.TaskModel`), sized for the task's labels."""

from __future__ import annotations

from gpt1.config import FinetuneTrainParams, TaskParams
from gpt1.downstream.families import family_of
from gpt1.model.heads import TaskModel
from gpt1.model.trunk import Trunk


def task_model(trunk: Trunk, task: TaskParams, cfg: FinetuneTrainParams) -> TaskModel:
    """The head `task` needs on `trunk`, with the dropout and seed of its training knobs."""
    family = family_of(task)
    return TaskModel(trunk, family, family.n_outputs(task), cfg.clf_dropout, cfg.seed)
