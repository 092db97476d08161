"""What whoever may trigger a deployment chooses: a task's name, a file to score and whether to
force, never a path written or the checkout worked on (docs/security.md); and a task name the
registry lacks is refused before it names any path."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from flows.finetune import finetune
from flows.full_pipeline import full_pipeline
from flows.predict import predict
from flows.sweep import sweep
from gpt1.errors import InputError
from tests.conftest import REPO


def test_no_deployment_takes_a_path_to_write_or_a_checkout() -> None:
    taken = {flow.name: set(flow.parameters.properties)
             for flow in (full_pipeline, finetune, predict, sweep)}
    assert taken == {"full-pipeline": {"force"}, "finetune": {"task", "force"},
                     "predict": {"task", "input"}, "sweep": {"task", "grid", "jobs"}}


@pytest.mark.parametrize("flow", [finetune, predict, sweep], ids=["finetune", "predict", "sweep"])
def test_a_task_outside_the_registry_is_refused_before_any_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flow) -> None:
    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    monkeypatch.chdir(tmp_path)
    args = {predict: ("../../elsewhere", "new.csv"), sweep: ("../../elsewhere", {"lr": [0.1]})
            }.get(flow, ("../../elsewhere",))
    with pytest.raises(InputError, match=r"^task '\.\./\.\./elsewhere': not in the task registry"):
        flow.fn(*args)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["params.yaml"]


@pytest.mark.parametrize(("grid", "jobs", "expected"), [
    ({"momentum": [0.9]}, None, "'momentum': not a fine-tuning knob"),
    ({"lr": []}, None, "lr: no values"),
    ({"epochs": ["two"]}, None, "epochs='two': Input should be a valid integer"),
    ({"lr": [0.1]}, 0, "jobs: 0; run at least 1 experiment at a time"),
])
def test_a_bad_grid_is_refused_before_anything_is_queued(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, grid: dict, jobs: int | None,
        expected: str) -> None:
    """What a sweep deployment's caller sends as `grid` and `jobs`: checked as `gpt1 sweep`
    checks its grid, before DVC is called (no checkout here: nothing could be queued)."""
    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match="^" + re.escape(expected)):
        sweep.fn("sst2", grid, jobs)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["params.yaml"]
