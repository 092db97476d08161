"""A Prefect task that runs one DVC stage exactly as `dvc repro` would."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from prefect import task
from prefect.logging import get_run_logger

EXPECTED_FAILURE = 2  # a stage's exit code for bad input or params: retrying cannot help


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


@task(task_run_name="{stage}", retries=1, retry_delay_seconds=5, retry_condition_fn=_transient)
def run_stage(stage: str, repo_root: Path, force: bool = False) -> str:
    """`dvc repro --single-item <stage>`: skipped when nothing it depends on changed, and
    recorded in dvc.lock and the DVC cache when it runs. Its output goes to the Prefect log."""
    logger = get_run_logger()
    cmd = [sys.executable, "-m", "dvc", "repro", "--single-item", stage, *(["--force"] if force
                                                                            else [])]
    logger.info("$ %s", " ".join(cmd[2:]))
    with subprocess.Popen(cmd, cwd=repo_root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, bufsize=1) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            logger.info(line.rstrip())
    if proc.returncode:
        raise StageFailed(stage, proc.returncode)
    return stage
