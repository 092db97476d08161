"""gpt1.jobs.zero_shot: the chance levels and task entry the metrics file states, and
which snapshots of each trunk are scored. (The whole job, on the sample tasks and snapshots of a
tiny GPT-1 and LSTM: tests/tasks/test_zero_shot.py.)"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest

from gpt1.config import load_params
from gpt1.downstream.zero_shot_heuristics import Examples, ZeroShotTask
from gpt1.errors import InputError
from gpt1.jobs.zero_shot import chance, task_entry, trunk_snapshots
from tests.conftest import REPO

TASKS = load_params(REPO / "params.yaml").tasks


def _accuracy(labels: np.ndarray, predictions: np.ndarray) -> float:
    return 100.0 * float(np.mean(labels == predictions))


@pytest.mark.parametrize(("metric", "options", "expected"), [
    ("accuracy", 2, 50.0), ("accuracy", 3, 33.33), ("accuracy", 4, 25.0), ("mcc", 2, 0.0),
])
def test_chance_is_a_guess_among_the_options_or_no_correlation(metric: str, options: int,
                                                               expected: float) -> None:
    assert chance(metric, options) == expected


def test_a_choice_task_entry_counts_the_choices_of_its_first_dev_split() -> None:
    dev = Examples([[1], [2], [3]], np.array([0, 1, 3]), [[[1], [2], [3], [4]]] * 3)
    entry = task_entry(TASKS["race"], ZeroShotTask("choice", dev, _accuracy))
    assert entry == {"run": True, "heuristic": "choice", "metric": "accuracy",
                     "split": "dev_high", "chance": 25.0, "examples": 3}
    assert list(entry) == ["run", "heuristic", "metric", "split", "chance", "examples"]


def test_an_acceptability_entry_counts_the_train_examples_its_threshold_was_fitted_on() -> None:
    dev, train = (Examples([[1]] * n, np.zeros(n, np.int64)) for n in (2, 5))
    entry = task_entry(TASKS["cola"], ZeroShotTask("acceptability", dev, _accuracy, train=train))
    assert entry == {"run": True, "heuristic": "acceptability", "metric": "mcc", "split": "dev",
                     "chance": 0.0, "examples": 2, "train_examples": 5}
    assert list(entry)[-1] == "train_examples"


def _snapshot(model_dir: Path, step: int) -> Path:
    folder = model_dir / "snapshots" / f"step-{step:08d}"
    folder.mkdir(parents=True)
    return folder


def test_the_snapshots_a_trunk_kept_in_step_order(tmp_path: Path) -> None:
    folders = {step: _snapshot(tmp_path, step) for step in (300, 0, 20)}
    (tmp_path / "snapshots" / "step-12").mkdir()  # not save_snapshot's name: not a snapshot
    found = trunk_snapshots("gpt1", tmp_path, "snapshots")
    assert found == {step: folders[step] for step in (0, 20, 300)}
    assert list(found) == [0, 20, 300]


def test_a_trunk_not_pretrained_is_left_out_saying_why(tmp_path: Path,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    _snapshot(tmp_path, 0)  # a stale snapshot beside the record does not count
    (tmp_path / "status.json").write_text(
        json.dumps({"run": False, "reason": "lstm is not in analysis.ablation.variants"}))
    with caplog.at_level(logging.INFO, "gpt1.jobs.zero_shot"):
        assert trunk_snapshots("lstm", tmp_path, "snapshots") == {}
    assert caplog.messages == ["lstm left out: not pretrained (lstm is not in "
                               "analysis.ablation.variants)"]


def test_a_trunk_without_snapshots_is_left_out_naming_the_folder(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, "gpt1.jobs.zero_shot"):
        assert trunk_snapshots("gpt1", tmp_path, "snapshots") == {}
    assert caplog.messages == [f"gpt1 left out: no snapshots in {tmp_path / 'snapshots'}"]


@pytest.mark.parametrize(("trunk", "stage"), [("gpt1", "pretrain"),
                                              ("lstm", "pretrain_control@lstm")])
def test_a_damaged_status_names_the_pretraining_stage_to_rerun(tmp_path: Path, trunk: str,
                                                               stage: str) -> None:
    (tmp_path / "status.json").write_text('{"run": fa')
    with pytest.raises(InputError, match=rf"status\.json: damaged, not the JSON stage {stage} "
                                         rf"writes .*`dvc repro --force {stage}`"):
        trunk_snapshots(trunk, tmp_path, "snapshots")
