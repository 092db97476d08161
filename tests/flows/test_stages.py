"""flows.stages: retries come from params.yaml, and bad input is never retried; the verdict the
stage's command leaves says how it ended, DVC's exit code whether DVC failed around it."""

from __future__ import annotations

import json
import pickle
import re
import shutil
import sys
import tomllib
from pathlib import Path

from dvc.repo import Repo
from prefect.states import Failed

from flows.stages import (
    StageFailed,
    _transient,
    missing_dependencies,
    stage_failure,
    stage_runner,
)
from gpt1.config import FlowsParams, ServerParams
from tasks.stage import verdict_path
from tests.conftest import REPO, copy_repo, dvc, edit_params, run

# Lines of a real `dvc repro` (3.67) whose cache was on a full disk; it exited 0.
CACHE_FULL = [
    "Running stage 'ingest':",
    "> python -m tasks.ingest",
    "09:16:41 gpt1 stage ingest done in 0.3s",
    "ERROR: failed to transfer '22dee508779d344bf63328f696a2b313' - [Errno 28] No space left on "
    "device: '/tmp/probe/data/raw/corpus/00000.parquet' -> "
    "'/tmp/smallfs/cache/files/md5/22/.p8RSw9bBYEtEB0VwRi-KsQ.tmp'",
    "Use `dvc push` to send your updates to remote storage.",
]


def retried(err: Exception) -> bool:
    return _transient(None, None, Failed(data=err))


def test_retries_come_from_params() -> None:
    flows = FlowsParams(retries=3, retry_delay_seconds=7, lock_timeout_seconds=0,
                        server=ServerParams(host="127.0.0.1", port=4200))
    runner = stage_runner(flows)
    assert (runner.retries, runner.retry_delay_seconds) == (3, 7)
    assert runner.retry_condition_fn is _transient


def test_only_transient_failures_are_retried() -> None:
    assert retried(StageFailed("pretrain", 1))
    assert retried(StageFailed("pretrain", 137))  # killed (OOM, SIGKILL)
    assert retried(StageFailed("ingest", None, "cache full"))
    assert retried(OSError("disk"))
    assert not retried(StageFailed("ingest", 2))  # bad input or params


def _no_missing() -> list[str]:
    return []


def test_bad_input_is_read_from_the_stages_verdict(tmp_path: Path) -> None:
    """A real bad input: DVC exits 255; the failure carries the verdict's 2 and message."""
    repo = copy_repo(tmp_path / "repo")
    edit_params(repo, **{"ingest.root": "README.md"})  # a file: DVC runs the stage
    dvc("repro", "code", cwd=repo)  # the fingerprint ingest depends on, as a flow runs it first
    proc = dvc("repro", "--single-item", "ingest", cwd=repo, check=False)
    assert proc.returncode == 255
    verdict = json.loads(verdict_path(repo, "ingest").read_text())
    failure = stage_failure("ingest", proc.returncode, verdict,
                            (proc.stdout + proc.stderr).splitlines(), _no_missing)
    assert failure is not None and failure.returncode == 2
    assert str(failure) == ("stage ingest failed with exit code 2: "
                            "ingest.root: data root README.md is not a directory")
    assert not retried(failure)
    assert vars(pickle.loads(pickle.dumps(failure))) == vars(failure)  # Prefect may pickle it


def test_a_bug_is_retried() -> None:
    verdict = {"stage": "pretrain", "verdict": "bug", "message": "KeyError('x')"}
    failure = stage_failure("pretrain", 255, verdict, [], _no_missing)
    assert failure is not None and (failure.returncode, failure.reason) == (1, "KeyError('x')")
    assert retried(failure)


def test_dvc_failing_around_the_command_keeps_its_code_and_words() -> None:
    """No verdict: the command did not run (DVC failed first) or was killed; retried."""
    locked = "ERROR: Unable to acquire lock. Most likely another DVC process is running"
    failure = stage_failure("ingest", 255, None, [locked], _no_missing)
    assert failure is not None and failure.returncode == 255
    assert failure.reason == locked.removeprefix("ERROR: ")
    assert retried(failure)
    ok = {"stage": "ingest", "verdict": "ok", "message": ""}
    failure = stage_failure("ingest", 255, ok, ["ERROR: could not save"], _no_missing)
    assert failure is not None and failure.returncode == 255 and retried(failure)
    assert stage_failure("ingest", 0, ok, [], _no_missing) is None


def test_a_missing_dependency_is_bad_input(tmp_path: Path) -> None:
    """DVC checks a stage's dependencies before its command runs: one that does not exist (a
    wrong ingest.root) fails as bad input does, named, and is not retried."""
    repo = copy_repo(tmp_path / "repo")
    edit_params(repo, **{"ingest.root": "no/such/folder"})
    dvc("repro", "code", cwd=repo)  # ingest's other dependency, there as after a flow's first
    proc = dvc("repro", "--single-item", "ingest", cwd=repo, check=False)
    assert proc.returncode != 0 and not verdict_path(repo, "ingest").exists()
    failure = stage_failure("ingest", proc.returncode, None, proc.stderr.splitlines(),
                            lambda: missing_dependencies(repo, "ingest"))
    assert failure is not None and failure.returncode == 2
    assert failure.reason is not None and failure.reason.startswith("no/such/folder: no such file")
    assert not retried(failure)


def test_a_failed_cache_copy_fails_the_stage() -> None:
    """DVC exits 0 after `failed to transfer`: the stage fails, and may be retried (DVC then
    re-runs it, its outputs not being in the cache)."""
    ok = {"stage": "ingest", "verdict": "ok", "message": ""}
    assert stage_failure("ingest", 0, ok, CACHE_FULL[:3] + CACHE_FULL[4:], _no_missing) is None
    failure = stage_failure("ingest", 0, ok, CACHE_FULL, _no_missing)
    assert failure is not None and failure.returncode is None
    assert str(failure).startswith("stage ingest failed: DVC exited 0 but did not save every "
                                   "output in its cache (failed to transfer '22dee508")
    assert "No space left on device" in str(failure) and "`dvc cache dir`" in str(failure)
    assert retried(failure)


VERDICT_STAGE = """\
import sys

from gpt1.errors import InputError
from tasks.stage import main


def run(params):
    if sys.argv[1] == "bad":
        raise InputError("made.txt: bad input")
    open("made.txt", "w").write(sys.argv[1])


main("probe", run, argv=[])
"""


def test_the_dvc_behaviour_the_flows_rely_on(tmp_path: Path) -> None:
    """What run_stage assumes of `dvc repro --single-item` (pinned below DVC's next major):
    DVC names the stage and the project to the command (DVC_STAGE, DVC_ROOT: the verdict lands
    in .dvc/tmp); it skips the command when nothing changed (no verdict); a command that fails
    fails DVC and leaves dvc.lock without the stage."""
    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    (tmp_path / "probe.py").write_text(VERDICT_STAGE)
    (tmp_path / "dvc.yaml").write_text(
        "stages:\n  good:\n    cmd: python probe.py good\n    outs:\n      - made.txt\n"
        "  bad:\n    cmd: python probe.py bad\n")
    Repo.init(str(tmp_path), no_scm=True).close()
    env = {"PYTHONPATH": str(REPO)}

    def repro(stage: str) -> int:
        verdict_path(tmp_path, stage).unlink(missing_ok=True)
        cmd = [sys.executable, "-m", "dvc", "repro", "--single-item", stage]
        return run(cmd, tmp_path, env=env, check=False).returncode

    assert repro("good") == 0
    assert json.loads(verdict_path(tmp_path, "good").read_text())["verdict"] == "ok"
    assert "good:" in (tmp_path / "dvc.lock").read_text()
    assert repro("good") == 0 and not verdict_path(tmp_path, "good").exists()  # skipped
    assert repro("bad") != 0
    assert json.loads(verdict_path(tmp_path, "bad").read_text()) == {
        "stage": "bad", "verdict": "input_error", "message": "made.txt: bad input"}
    assert "bad:" not in (tmp_path / "dvc.lock").read_text()


def test_dvc_is_pinned_below_its_next_major() -> None:
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    (dvc_pin,) = [d for d in deps if re.match(r"dvc\b(?!live)", d)]
    assert re.search(r",\s*<4\b", dvc_pin), dvc_pin
