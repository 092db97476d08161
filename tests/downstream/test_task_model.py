"""gpt1.downstream.task_model: a registry task's model, the head its family reads sized for its
labels, with the dropout and seed of the fine-tuning knobs."""

from __future__ import annotations

import pytest
import torch

from gpt1.config import Family, TaskParams
from gpt1.downstream.families import FAMILIES
from gpt1.downstream.task_model import task_model
from gpt1.model.heads import TaskModel
from tests.toy_models import toy_cfg, toy_model

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_for_task_sizes_the_head() -> None:
    def spec(family: Family, labels: list[str] | None, metric: str) -> TaskParams:
        return TaskParams(title="toy", family=family, reader="toy", labels=labels,
                          metrics=[metric], files={"train": "train.tsv", "dev": "dev.tsv"})

    trunk, cfg = toy_model().trunk, toy_cfg(clf_dropout=0.2, seed=3)
    mnli = task_model(trunk, spec("entailment", ["a", "b", "c"], "accuracy"), cfg)
    assert (mnli.head.out_features, mnli.dropout.p, mnli.regression) == (3, 0.2, False)
    assert torch.equal(mnli.head.weight,
                       TaskModel(trunk, FAMILIES["entailment"], 3, 0.0, 3).head.weight)
    stsb = task_model(trunk, spec("similarity", None, "pearson"), cfg)
    assert (stsb.head.out_features, stsb.regression) == (1, True)
    race = task_model(trunk, spec("multiple_choice", None, "accuracy"), cfg)
    assert (race.head.out_features, race.regression) == (1, False)
    with pytest.raises(ValueError, match="1 output per choice, not 4"):
        TaskModel(trunk, FAMILIES["multiple_choice"], 4, 0.0, 0)
