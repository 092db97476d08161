"""gpt1.registry: the task specs (files, labels, metric, the paper's figure)."""

from __future__ import annotations

import numpy as np
import pytest

from gpt1.metrics import score
from gpt1.registry import SPLITS, TASKS, task_spec


def test_sst2_spec() -> None:
    spec = TASKS["sst2"]
    assert spec.name == "sst2"
    assert spec.title == "SST-2"
    assert spec.family == "classification"
    assert spec.labels == ("0", "1")
    assert spec.metric == "accuracy"
    assert spec.paper_score == 91.3
    assert spec.files == {"train": "glue/SST-2/train.tsv", "dev": "glue/SST-2/dev.tsv",
                          "test": "glue/SST-2/test.tsv"}
    assert SPLITS == ("train", "dev", "test")


def test_task_spec() -> None:
    assert task_spec("sst2") is TASKS["sst2"]
    with pytest.raises(ValueError, match=r"unknown task 'nope'.*known: \[.*'sst2'.*\]"):
        task_spec("nope")


def test_specs_are_immutable() -> None:
    with pytest.raises(AttributeError):
        TASKS["sst2"].paper_score = 100.0  # type: ignore[misc]


def test_every_spec_is_consistent() -> None:
    for name, spec in TASKS.items():
        assert spec.name == name
        assert set(spec.files) == set(SPLITS), name
        assert 0 < spec.paper_score <= 100, name
        assert len(spec.labels) >= 2 and len(set(spec.labels)) == len(spec.labels), name
        labels = np.array([0, 1, 1, 0])
        assert score(spec.metric, labels, labels) == {spec.metric: pytest.approx(100.0)}, name


def test_cola_spec() -> None:
    spec = TASKS["cola"]
    assert (spec.title, spec.metric, spec.paper_score) == ("CoLA", "mcc", 45.4)
