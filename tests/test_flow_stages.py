"""flows.stages: retries come from params.yaml, and bad input is never retried; DVC's output
says what the stage's own command exited with and why."""

from __future__ import annotations

import pickle
from pathlib import Path

from prefect.states import Failed

from flows.stages import StageFailed, _transient, stage_failure, stage_runner
from gpt1.config import FlowsParams, ServerParams
from tests.conftest import copy_repo, dvc, edit_params

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


def test_bad_input_is_read_through_dvc(tmp_path: Path) -> None:
    """A real bad input: DVC exits 255, the failure carries the stage's 2 and its message."""
    repo = copy_repo(tmp_path / "repo")
    edit_params(repo, **{"ingest.root": "README.md"})  # a file: DVC runs the stage
    proc = dvc("repro", "--single-item", "ingest", cwd=repo, check=False)
    assert proc.returncode == 255
    failure = stage_failure("ingest", proc.returncode, (proc.stdout + proc.stderr).splitlines())
    assert failure is not None and failure.returncode == 2
    assert str(failure) == ("stage ingest failed with exit code 2: "
                            "ingest.root: data root README.md is not a directory")
    assert not retried(failure)
    assert vars(pickle.loads(pickle.dumps(failure))) == vars(failure)  # Prefect may pickle it


def test_other_failures_keep_dvcs_word() -> None:
    killed = ["ERROR: failed to reproduce 'pretrain': failed to run: python -m tasks.pretrain, "
              "exited with 137"]
    assert str(stage_failure("pretrain", 255, ["> a stage line: exited with 2", *killed])) == \
        f"stage pretrain failed with exit code 137: {killed[0].removeprefix('ERROR: ')}"
    # DVC itself failed before the command ran: its code and its words
    locked = "ERROR: Unable to acquire lock. Most likely another DVC process is running"
    failure = stage_failure("ingest", 255, [locked])
    assert failure is not None and failure.returncode == 255
    assert failure.reason == locked.removeprefix("ERROR: ")
    assert retried(failure)


def test_a_missing_dependency_is_bad_input() -> None:
    """DVC checks a stage's dependencies before its command runs: one that does not exist (a
    wrong ingest.root) fails as bad input does, and is not retried."""
    missing = "ERROR: failed to reproduce 'ingest': [Errno 2] No such file or directory: '/x'"
    failure = stage_failure("ingest", 255, ["Running stage 'ingest':", missing])
    assert failure is not None and failure.returncode == 2
    assert failure.reason == missing.removeprefix("ERROR: ")
    assert not retried(failure)


def test_a_failed_cache_copy_fails_the_stage() -> None:
    """DVC exits 0 after `failed to transfer`: the stage fails, and may be retried (DVC then
    re-runs it, its outputs not being in the cache)."""
    assert stage_failure("ingest", 0, CACHE_FULL[:3] + CACHE_FULL[4:]) is None
    failure = stage_failure("ingest", 0, CACHE_FULL)
    assert failure is not None and failure.returncode is None
    assert str(failure).startswith("stage ingest failed: DVC exited 0 but did not save every "
                                   "output in its cache (failed to transfer '22dee508")
    assert "No space left on device" in str(failure) and "`dvc cache dir`" in str(failure)
    assert retried(failure)
