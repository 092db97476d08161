"""What whoever may trigger a deployment chooses: a task's name, a file to score and whether to
force, never a path written or the checkout worked on (docs/security.md); and a task name the
registry lacks is refused before it names any path."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from flows.finetune import finetune
from flows.full_pipeline import full_pipeline
from flows.predict import predict
from gpt1.errors import InputError
from tests.conftest import REPO


def test_no_deployment_takes_a_path_to_write_or_a_checkout() -> None:
    taken = {flow.name: set(flow.parameters.properties)
             for flow in (full_pipeline, finetune, predict)}
    assert taken == {"full-pipeline": {"force"}, "finetune": {"task", "force"},
                     "predict": {"task", "input"}}


@pytest.mark.parametrize("flow", [finetune, predict], ids=["finetune", "predict"])
def test_a_task_outside_the_registry_is_refused_before_any_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flow) -> None:
    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    monkeypatch.chdir(tmp_path)
    args = ("../../elsewhere", "new.csv") if flow is predict else ("../../elsewhere",)
    with pytest.raises(InputError, match=r"^task '\.\./\.\./elsewhere': not in the task registry"):
        flow.fn(*args)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["params.yaml"]
