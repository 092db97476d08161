"""The Prefect `full-pipeline` flow runs the DVC stage graph and leaves DVC exactly as
`dvc repro` would."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from flows.dag import rerun_order, run_order, upstream_order
from gpt1 import dag
from gpt1.config import load_params
from gpt1.errors import InputError
from tests.conftest import REPO, dvc, edit_params, only_sst2, run

pytestmark = pytest.mark.e2e


def test_stage_order_comes_from_dvc_yaml() -> None:
    """The checkout's own params (the quick start: SST-2 fine-tuned and analysed, no prediction
    file, no LSTM): the stages dvc.yaml declares from its dag.yaml, in dvc.yaml's order."""
    order = run_order(REPO)
    assert order == ["code", "ingest", "clean", "bpe", "tokenize", "pretrain", "finetune@sst2",
                     "lm_eval", "ablation@full-sst2", "ablation@no_pretrain-sst2",
                     "ablation@no_aux-sst2", "transfer@sst2", "zero_shot@sst2", "report"]
    assert order == dag.resolve(load_params(REPO / "params.yaml"), REPO).stages()
    assert rerun_order(REPO, "finetune@sst2") == ["code", "ingest", "clean", "bpe", "tokenize",
                                                  "pretrain", "finetune@sst2", "report"]
    assert upstream_order(REPO, "finetune@sst2") == ["code", "ingest", "clean", "bpe",
                                                     "tokenize", "pretrain", "finetune@sst2"]
    with pytest.raises(InputError, match="no stage 'finetune@nope'"):  # a deployment's -p
        rerun_order(REPO, "finetune@nope")


def wait_for(condition, what: str, timeout: float = 300,
             flow: subprocess.Popen | None = None, log: Path | None = None) -> None:
    """Poll `condition` until it holds; fail after `timeout` s, or at once when `flow` has
    ended without it (its `log` is shown either way)."""
    deadline = time.monotonic() + timeout
    while not condition():
        ended = flow is not None and flow.poll() is not None
        if ended or time.monotonic() > deadline:
            why = f"the flow ended with {flow.returncode}" if ended else f"after {timeout} s"
            shown = log.read_text()[-4000:] if log is not None else ""
            pytest.fail(f"no {what}: {why}\n{shown}")
        time.sleep(0.1)


def group_gone(pgid: int) -> bool:
    """No process of process group `pgid` is left, zombies included."""
    return all(_pgid(p.pid) != pgid for p in psutil.process_iter())


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def newest_checkpoint(repo: Path) -> int:
    steps = [int(p.stem.removeprefix("step-"))
             for p in (repo / "artifacts" / "checkpoints" / "pretrain").glob("*/step-*.pt")]
    return max(steps, default=0)


def start_flow(repo: Path, env: dict[str, str], log: Path) -> subprocess.Popen:
    with open(log, "w") as out:
        return subprocess.Popen([sys.executable, "-m", "flows.full_pipeline"], cwd=repo, env=env,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def assert_truthful_status(repo: Path) -> None:
    """`dvc status` answers (no stale lock blocks it): pretraining is not done, the stages
    before it are."""
    status = dvc("status", cwd=repo).stdout
    assert "pretrain:" in status
    for done in ("code", "ingest", "clean", "bpe", "tokenize"):
        assert f"{done}:" not in status, status


@pytest.mark.long
def test_cancelled_and_crashed_runs_recover(tiny_repo: Path, tmp_path: Path,
                                            prefect_api: str) -> None:
    """A run cancelled during pretraining (SIGTERM to the flow run, as Prefect cancels) and one
    killed outright (SIGKILL to all its processes: no cleanup) both leave `dvc status` truthful;
    the next run skips the finished stages, resumes pretraining from its checkpoint, and leaves
    DVC exactly as `dvc repro` would. On the DAG cut to SST-2: every kind of stage, once."""
    only_sst2(tiny_repo)
    edit_params(tiny_repo, **{"pretrain.max_steps": 300, "pretrain.checkpoint_every": 25})
    prefect = {"PREFECT_HOME": str(tmp_path / "prefect"), "PREFECT_API_URL": prefect_api}
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           **prefect}

    cancelled_log = tmp_path / "cancelled.log"
    cancelled = start_flow(tiny_repo, env, cancelled_log)
    try:
        wait_for(lambda: newest_checkpoint(tiny_repo) > 0, "pretraining checkpoint",
                 flow=cancelled, log=cancelled_log)
        cancelled.send_signal(signal.SIGTERM)
        cancelled.wait(timeout=120)
    finally:  # whatever of its process group is left (nothing, once it has stopped cleanly)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(cancelled.pid, signal.SIGKILL)
    log = cancelled_log.read_text()
    assert "pretraining stopped: SIGTERM at step" in log, log  # it saved a checkpoint first
    assert_truthful_status(tiny_repo)
    saved = newest_checkpoint(tiny_repo)

    crashed_log = tmp_path / "crashed.log"
    crashed = start_flow(tiny_repo, env, crashed_log)
    try:
        wait_for(lambda: newest_checkpoint(tiny_repo) > saved, "newer checkpoint",
                 flow=crashed, log=crashed_log)
    finally:
        os.killpg(crashed.pid, signal.SIGKILL)
        crashed.wait()
    wait_for(lambda: group_gone(crashed.pid), "end of the killed processes", timeout=30)
    assert_truthful_status(tiny_repo)

    # the rest of the DAG
    proc = run([sys.executable, "-m", "flows.full_pipeline"], tiny_repo, env=prefect)
    log = proc.stdout + proc.stderr
    for done in ("code", "ingest", "clean", "bpe", "tokenize"):
        assert f"Stage '{done}' didn't change, skipping" in log
        assert f"Running stage '{done}'" not in log
    assert "resumed from the checkpoint of step" in log
    for stage in run_order(tiny_repo):
        assert f"Task run '{stage}' - Finished in state Completed()" in log
    assert "Flow run" in log and "Finished in state Completed()" in log
    assert (tiny_repo / "reports" / "summary.md").is_file()
    assert "Data and pipelines are up to date." in dvc("status", cwd=tiny_repo).stdout
    # and `dvc repro` agrees that there is nothing left to do
    assert "Running stage" not in dvc("repro", cwd=tiny_repo).stdout
