"""A Prefect task that runs one DVC stage exactly as `dvc repro` would."""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import psutil
from prefect import Task, task
from prefect.logging import get_run_logger

from gpt1.config import FlowsParams

EXPECTED_FAILURE = 2  # a stage's exit code for bad input or params: retrying cannot help
STOP_GRACE_SECONDS = 60  # after SIGTERM, how long a stage gets to save its work (checkpoints)

# What `dvc repro` prints: `ERROR: failed to reproduce 'ingest': failed to run: python -m
# tasks.ingest, exited with 2` when a stage's command fails; tasks.stage's `stage ingest failed:
# <why>` on bad input; `ERROR: failed to transfer '<md5>' - [Errno 28] No space left on
# device: ...` for each output it could not copy into its cache, after which it still exits 0.
COMMAND_EXIT = re.compile(r"failed to run: .*, exited with (-?\d+)\s*$")
STAGE_ERROR = re.compile(r"\bstage \S+ failed: (.*\S)")
DVC_ERROR = re.compile(r"^ERROR: (.*\S)")
CACHE_ERROR = re.compile(r"^ERROR: (failed to transfer .*\S)")
# DVC's own check before the command runs: a dependency (ingest.root, say) does not exist
MISSING_DEPENDENCY = re.compile(r"^ERROR: failed to reproduce '[^']+': \[Errno 2\] ")


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


def stage_failure(stage: str, returncode: int, lines: list[str]) -> StageFailed | None:
    """How `dvc repro` of `stage` failed, judged by its exit code and output `lines`; None if
    it did not."""
    if returncode:
        command_exit = _last(COMMAND_EXIT, lines)
        if command_exit is not None:
            returncode = int(command_exit)
        elif any(MISSING_DEPENDENCY.search(line) for line in lines):
            returncode = EXPECTED_FAILURE  # a missing input: retrying cannot help either
        return StageFailed(stage, returncode, _last(STAGE_ERROR, lines) or _last(DVC_ERROR, lines))
    cache_error = _last(CACHE_ERROR, lines)
    if cache_error is not None:
        return StageFailed(stage, None, f"DVC exited 0 but did not save every output in its "
                           f"cache ({cache_error}); is the disk of the DVC cache (`dvc cache "
                           f"dir`) full?")
    return None


def _transient(task, task_run, state) -> bool:  # Prefect's retry_condition_fn signature
    try:
        state.result()
    except StageFailed as err:
        return err.returncode != EXPECTED_FAILURE
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
def run_stage(stage: str, repo_root: Path, force: bool = False) -> bool:
    """`dvc repro --single-item <stage>`: skipped when nothing it depends on changed, and
    recorded in dvc.lock and the DVC cache when it runs. Its output goes to the Prefect log.
    Returns whether the stage ran. If the flow run is cancelled, the stage is stopped too."""
    logger = get_run_logger()
    cmd = [sys.executable, "-m", "dvc", "repro", "--single-item", stage,
           *(["--force"] if force else [])]
    logger.info("$ %s", " ".join(cmd[2:]))
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
    failure = stage_failure(stage, proc.returncode, lines)
    if failure is not None:
        raise failure
    return any(line.startswith("Running stage") for line in lines)


def stage_runner(flows: FlowsParams) -> Task:
    """`run_stage` with the retries of params.yaml's `flows`."""
    return run_stage.with_options(retries=flows.retries,
                                  retry_delay_seconds=flows.retry_delay_seconds)
