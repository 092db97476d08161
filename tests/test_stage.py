"""tasks.stage: the shell every stage runs in — one-line errors with exit code 2, and params
that change under a running stage fail it rather than reach dvc.lock."""

from __future__ import annotations

import datetime
import errno
import json
import logging
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gpt1.config import Params
from gpt1.presets.edit import nest, update_params
from tasks.stage import (
    checkout_commit,
    declared_params,
    main,
    record_path,
    write_stage_record,
)
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
        assert params.pretrain.max_steps == 800  # what the stage trains with (params.yaml)
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


def test_record_paths_group_foreach_and_matrix_stages() -> None:
    assert record_path("ingest") == Path("metrics/stages/ingest.json")
    assert record_path("finetune@sst2") == Path("metrics/stages/finetune/sst2.json")
    assert record_path("ablation@no_pretrain-sst2") == Path(
        "metrics/stages/ablation/no_pretrain-sst2.json")


def test_a_stage_that_succeeds_records_its_time(stage_dir: Path,
                                                caplog: pytest.LogCaptureFixture) -> None:
    before = datetime.datetime.now(datetime.UTC).replace(microsecond=0)

    def slow(params: Params) -> None:
        time.sleep(0.3)

    assert _run_stage(slow, caplog) == 0
    record = json.loads((stage_dir / "metrics/stages/pretrain.json").read_text())
    assert set(record) == {"stage", "seconds", "finished", "commit", "uncommitted_changes"}
    assert record["stage"] == "pretrain" and 0.3 <= record["seconds"] < 30
    finished = datetime.datetime.fromisoformat(record["finished"])
    assert before <= finished <= datetime.datetime.now(datetime.UTC)
    assert record["commit"] is None  # not a git checkout
    assert not list(stage_dir.glob("metrics/stages/.*"))  # written in place, nothing left over


def test_a_failed_stage_records_nothing(stage_dir: Path, caplog: pytest.LogCaptureFixture,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DVC_STAGE", "finetune@sst2")

    def fail(params: Params) -> None:
        raise ValueError("bad input")

    assert _run_stage(fail, caplog) == 2
    assert not (stage_dir / "metrics").exists()


def test_run_outside_dvc_records_nothing(stage_dir: Path, caplog: pytest.LogCaptureFixture,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DVC_STAGE")
    assert _run_stage(lambda params: None, caplog) == 0
    assert not (stage_dir / "metrics").exists()


def test_the_record_names_the_commit_and_code_changes(stage_dir: Path) -> None:
    git = ["git", "-c", "user.email=test@gpt1.local", "-c", "user.name=gpt1 tests"]
    (stage_dir / "code.py").write_text("x = 1\n")
    for cmd in (["git", "init", "-q"], [*git, "add", "-A"], [*git, "commit", "-qm", "c"]):
        subprocess.run(cmd, cwd=stage_dir, check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=stage_dir, capture_output=True,
                          text=True, check=True).stdout.strip()
    (stage_dir / "params.yaml").write_text((stage_dir / "params.yaml").read_text() + "\n")
    record = json.loads(write_stage_record("finetune@sst2", 1.25, stage_dir).read_text())
    assert record["commit"] == head and record["seconds"] == 1.2  # rounded to 0.1 s
    assert record["uncommitted_changes"] is False  # params.yaml is a run's to change
    (stage_dir / "code.py").write_text("x = 2\n")
    assert checkout_commit(stage_dir) == {"commit": head, "uncommitted_changes": True}
