"""tasks.stage: the shell every stage runs in — one-line errors with exit code 2, and params
that change under a running stage fail it rather than reach dvc.lock."""

from __future__ import annotations

import errno
import logging
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from gpt1.config import Params
from gpt1.presets.edit import nest, update_params
from tasks.stage import declared_params, main
from tests.conftest import REPO


def test_declared_params_are_dvc_yamls() -> None:
    dvc_yaml = REPO / "dvc.yaml"
    assert declared_params(dvc_yaml, "pretrain") == ["model", "pretrain"]
    assert declared_params(dvc_yaml, "finetune@sst2") == [
        "finetune.seeds", "finetune.train", "tasks.sst2"]
    assert declared_params(dvc_yaml, "no-such-stage") == []


@pytest.fixture()
def stage_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A checkout's dvc.yaml and params.yaml, and the environment DVC gives a stage's command."""
    for name in ("dvc.yaml", "params.yaml"):
        shutil.copy(REPO / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DVC_ROOT", str(tmp_path))
    monkeypatch.setenv("DVC_STAGE", "pretrain")
    return tmp_path


def _run_stage(run: Callable[[Params], None], caplog: pytest.LogCaptureFixture) -> int:
    with caplog.at_level(logging.INFO, logger="tasks.stage"), pytest.raises(SystemExit) as stopped:
        main("pretrain", run, argv=[])
        raise SystemExit(0)
    return int(stopped.value.code)


def test_a_param_changed_while_the_stage_ran_fails_it(stage_dir: Path,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    def edit_mid_run(params: Params) -> None:
        assert params.pretrain.max_steps == 300  # what the stage trains with
        update_params(Path("params.yaml"), nest({"pretrain.max_steps": 500}))

    assert _run_stage(edit_mid_run, caplog) == 2
    assert ("stage pretrain failed: params.yaml: pretrain changed while the stage ran; its "
            "outputs were made with the values it read at the start") in caplog.text


def test_a_param_the_stage_does_not_read_may_change(stage_dir: Path,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    def edit_other(params: Params) -> None:
        update_params(Path("params.yaml"), nest({"flows.retries": 3, "finetune.seeds": [1, 2]}))

    assert _run_stage(edit_other, caplog) == 0
    assert "stage pretrain done" in caplog.text


@pytest.mark.parametrize(("error", "message"), [
    (OSError(errno.ENOSPC, "No space left on device", "artifacts/x.pt"),
     "no space left on device writing artifacts/x.pt: free some space and run the stage again"),
    (OSError(errno.EACCES, "Permission denied", "data/raw"), "[Errno 13] Permission denied: "
                                                            "'data/raw'"),
    (FloatingPointError("pretrain: the loss became nan at step 3"),
     "pretrain: the loss became nan at step 3"),
    (ValueError("x.tsv:3: bad label"), "x.tsv:3: bad label"),
])
def test_expected_failures_are_one_line_and_exit_2(stage_dir: Path,
                                                   caplog: pytest.LogCaptureFixture,
                                                   error: Exception, message: str) -> None:
    def fail(params: Params) -> None:
        raise error

    assert _run_stage(fail, caplog) == 2
    assert f"stage pretrain failed: {message}" in caplog.text


def test_a_bug_keeps_its_traceback(stage_dir: Path) -> None:
    def bug(params: Params) -> None:
        raise KeyError("oops")

    with pytest.raises(KeyError):
        main("pretrain", bug, argv=[])
