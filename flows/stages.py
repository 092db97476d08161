"""A Prefect task that runs one DVC stage exactly as `dvc repro` would."""

from __future__ import annotations

import contextlib
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


class StageFailed(RuntimeError):
    def __init__(self, stage: str, returncode: int) -> None:
        super().__init__(f"stage {stage} failed with exit code {returncode}")
        self.stage, self.returncode = stage, returncode


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
    ran = False

    def log_line(line: str) -> None:
        logger.info(line.rstrip())

    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            ran = ran or line.startswith("Running stage")
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
    if proc.returncode:
        raise StageFailed(stage, proc.returncode)
    return ran


def stage_runner(flows: FlowsParams) -> Task:
    """`run_stage` with the retries of params.yaml's `flows`."""
    return run_stage.with_options(retries=flows.retries,
                                  retry_delay_seconds=flows.retry_delay_seconds)
