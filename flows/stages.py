"""A Prefect task that runs one DVC stage exactly as `dvc repro` would."""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import psutil
from prefect import Task, task
from prefect.logging import get_run_logger

from flows.lock import PipelineBusy, wait_for_dvc
from gpt1.config import FlowsParams
from tasks.stage import verdict_path

EXPECTED_FAILURE = 2  # a stage's exit code for bad input or params: retrying cannot help
BUG = 1  # a stage's exit code for anything else: a traceback, and worth a retry
STOP_GRACE_SECONDS = 60  # after SIGTERM, how long a stage gets to save its work (checkpoints)

# The one line of DVC's output still read: DVC exits 0 after `ERROR: failed to transfer '<md5>'
# - [Errno 28] No space left on device: ...` for each output it could not copy into its cache.
# Its other lines only supply the words of a failure, never its verdict.
CACHE_ERROR = re.compile(r"^ERROR: (failed to transfer .*\S)")
DVC_ERROR = re.compile(r"^ERROR: (.*\S)")


class StageFailed(RuntimeError):
    """`dvc repro` of `stage` failed. `returncode` is the stage command's exit code, or DVC's
    where the command did not fail; None where DVC exited 0 without caching all outputs."""

    def __init__(self, stage: str, returncode: int | None, reason: str | None = None) -> None:
        super().__init__(stage, returncode, reason)  # all the arguments: pickles as it is
        self.stage, self.returncode, self.reason = stage, returncode, reason

    def __str__(self) -> str:
        code = "" if self.returncode is None else f" with exit code {self.returncode}"
        return f"stage {self.stage} failed{code}" + (f": {self.reason}" if self.reason else "")


def _last(pattern: re.Pattern[str], lines: list[str]) -> str | None:
    """The first group of `pattern` in the last of `lines` it matches."""
    found = [match.group(1) for line in lines if (match := pattern.search(line))]
    return found[-1] if found else None


def stage_failure(stage: str, returncode: int, verdict: dict[str, str] | None,
                  lines: list[str], missing: Callable[[], list[str]]) -> StageFailed | None:
    """How `dvc repro` of `stage` failed, None if it did not: judged by the verdict the stage's
    command left (`tasks.stage.write_verdict`; None if the command did not run), DVC's exit
    code, and, where DVC failed with no verdict, the stage's dependencies that are `missing`."""
    if verdict is not None and verdict["verdict"] != "ok":
        code = EXPECTED_FAILURE if verdict["verdict"] == "input_error" else BUG
        return StageFailed(stage, code, verdict["message"])
    if returncode:
        gone = missing() if verdict is None else []
        if gone:  # DVC checks them before the command runs: retrying cannot help
            return StageFailed(stage, EXPECTED_FAILURE,
                               f"{', '.join(gone)}: no such file or directory (a dependency of "
                               "the stage in dvc.yaml)")
        return StageFailed(stage, returncode, _last(DVC_ERROR, lines))
    cache_error = _last(CACHE_ERROR, lines)
    if cache_error is not None:
        return StageFailed(stage, None, f"DVC exited 0 but did not save every output in its "
                           f"cache ({cache_error}); is the disk of the DVC cache (`dvc cache "
                           f"dir`) full?")
    return None


def missing_dependencies(repo_root: Path, stage: str) -> list[str]:
    """The dependencies of `stage` in dvc.yaml that do not exist, as DVC resolves them."""
    from dvc.repo import Repo  # imported where it is needed: the flow's own process is light

    with Repo(str(repo_root)) as repo:
        (found,) = repo.stage.collect(f"{repo_root / 'dvc.yaml'}:{stage}")  # not cwd's
        return [str(dep) for dep in found.deps if not dep.exists]


def _transient(task, task_run, state) -> bool:  # Prefect's retry_condition_fn signature
    try:
        state.result()
    except StageFailed as err:
        return err.returncode != EXPECTED_FAILURE
    except PipelineBusy:  # it already waited flows.lock_timeout_seconds: fail once
        return False
    except Exception:
        return True
    return False


def _kill(processes: list[psutil.Process]) -> None:
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()


def _stop(proc: subprocess.Popen, log_line: Callable[[str], None], signal_it: bool) -> None:
    """Stop a `dvc repro` process: SIGTERM (if `signal_it`) to the stage's command beneath dvc,
    which stops it (pretraining after saving a checkpoint) and lets dvc fail the stage and
    release its locks; or to dvc itself while it has no command running. Logs what they print
    meanwhile; SIGKILLs those still running after the grace period."""
    try:
        dvc = psutil.Process(proc.pid)
        commands = dvc.children(recursive=True)
    except psutil.NoSuchProcess:
        return
    if signal_it:
        # not SIGINT: a job started in the background ignores it, and so do its children
        for process in commands or [dvc]:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.terminate()
    deadline = threading.Timer(STOP_GRACE_SECONDS, _kill, [[dvc, *commands]])
    deadline.start()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            log_line(line)
        proc.wait()
    finally:
        deadline.cancel()


@task(task_run_name="{stage}", retry_condition_fn=_transient)
def run_stage(stage: str, repo_root: Path, force: bool = False,
              lock_timeout: float = 0) -> bool:
    """`dvc repro --single-item <stage>`: skipped when nothing it depends on changed, and
    recorded in dvc.lock and the DVC cache when it runs. Its output goes to the Prefect log.
    Returns whether the stage ran. If the flow run is cancelled, the stage is stopped too.
    A DVC command someone else runs on the checkout is waited for, up to `lock_timeout` s."""
    logger = get_run_logger()
    wait_for_dvc(repo_root, lock_timeout, logger.warning)
    cmd = [sys.executable, "-m", "dvc", "repro", "--single-item", stage,
           *(["--force"] if force else [])]
    logger.info("$ %s", " ".join(cmd[2:]))
    verdict_file = verdict_path(repo_root, stage)
    verdict_file.unlink(missing_ok=True)  # a verdict there now is an earlier run's
    proc = subprocess.Popen(cmd, cwd=repo_root, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, bufsize=1)
    lines: list[str] = []

    def log_line(line: str) -> None:
        logger.info(line.rstrip())

    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip())
            log_line(line)
        proc.wait()
    except KeyboardInterrupt:  # Ctrl-C: the terminal interrupted the stage's processes too
        _stop(proc, log_line, signal_it=False)
        raise
    except BaseException:  # cancellation (Prefect's TerminationSignal), anything else
        _stop(proc, log_line, signal_it=True)
        raise
    finally:
        if proc.stdout is not None:
            proc.stdout.close()
    verdict = json.loads(verdict_file.read_text()) if verdict_file.is_file() else None
    failure = stage_failure(stage, proc.returncode, verdict, lines,
                            lambda: missing_dependencies(repo_root, stage))
    if failure is not None:
        raise failure
    return verdict is not None  # the stage's command ran (DVC skips one whose inputs are as
    # dvc.lock recorded them)


def stage_runner(flows: FlowsParams) -> Task:
    """`run_stage` with the retries of params.yaml's `flows`."""
    return run_stage.with_options(retries=flows.retries,
                                  retry_delay_seconds=flows.retry_delay_seconds)
