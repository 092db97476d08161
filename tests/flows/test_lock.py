"""flows.lock: flow runs on one checkout take turns, a dead holder never blocks the next, and a
`dvc repro` started by hand is waited for."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from dvc.repo import Repo

from flows.lock import LOCK_FILE, PipelineBusy, dvc_holders, pipeline_lock, wait_for_dvc
from tests.conftest import copy_repo, edit_params, run
from tests.flows.test_stages import retried

HOLD = """
import sys, time
from pathlib import Path
from flows.lock import pipeline_lock
with pipeline_lock(Path(sys.argv[1]), 0, "flow run full-pipeline/holder"):
    print("locked", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def hold(root: Path, seconds: float) -> subprocess.Popen:
    """Another process holding the lock of `root` for `seconds`, once it has printed."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(root), str(seconds)],
                            stdout=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parents[2])
    assert proc.stdout is not None and proc.stdout.readline() == "locked\n"
    return proc


def test_second_run_waits_for_the_first(tmp_path: Path) -> None:
    holder = hold(tmp_path, 1.5)
    told: list[str] = []
    started = time.monotonic()
    with pipeline_lock(tmp_path, 60, "flow run finetune/second", told.append, poll=0.1):
        waited = time.monotonic() - started
        assert "finetune/second" in (tmp_path / LOCK_FILE).read_text()
    assert waited > 1.0  # the holder kept it for 1.5 s after saying so
    assert holder.wait(timeout=30) == 0
    assert len(told) == 1 and "flow run full-pipeline/holder (pid " in told[0]
    assert (tmp_path / LOCK_FILE).read_text() == ""  # released, holder forgotten


def test_busy_checkout_fails_with_the_holder_named(tmp_path: Path) -> None:
    holder = hold(tmp_path, 30)
    try:
        expected = (rf"flow run full-pipeline/holder \(pid {holder.pid}\) is still running the "
                    r"pipeline after 0.3 s \(flows.lock_timeout_seconds\)")
        with (pytest.raises(PipelineBusy, match=expected),
              pipeline_lock(tmp_path, 0.3, "second", lambda _: None, poll=0.1)):
            pytest.fail("the lock was taken twice")
    finally:
        holder.kill()
        holder.wait()


def test_a_killed_holder_releases_the_lock(tmp_path: Path) -> None:
    holder = hold(tmp_path, 30)
    os.kill(holder.pid, signal.SIGKILL)  # a crash: no cleanup runs
    holder.wait()
    with pipeline_lock(tmp_path, 0, "next", lambda _: pytest.fail("waited for a dead run")):
        pass


def test_a_flow_reads_dvc_yaml_only_once_it_holds_the_lock(tmp_path: Path,
                                                          prefect_api: str) -> None:
    """The run holding the checkout rewrites dvc.lock in place, stage by stage: a second run
    that read the stage graph before waiting for the lock failed on a half-written dvc.lock
    (as in CI). Here dvc.lock is unreadable while another run holds the lock, so the second
    run must wait, and time out as busy, without having read it."""
    repo = copy_repo(tmp_path / "repo")
    edit_params(repo, **{"flows.lock_timeout_seconds": 2})
    (repo / "dvc.lock").write_text("schema: '2.0'\nstages:\n  ingest:\n    cmd: [half")
    holder = hold(repo, 600)
    try:
        prefect = {"PREFECT_HOME": str(tmp_path / "prefect"), "PREFECT_API_URL": prefect_api}
        proc = run([sys.executable, "-m", "flows.finetune", "sst2"], repo, env=prefect,
                   check=False)
    finally:
        holder.kill()
        holder.wait()
    log = proc.stdout + proc.stderr
    assert proc.returncode != 0, log
    assert "PipelineBusy" in log and "full-pipeline/holder" in log, log
    assert "dvc.lock" not in log, log


def test_a_flow_waits_for_a_dvc_repro_started_by_hand(tmp_path: Path) -> None:
    """A real `dvc repro` whose stage is running holds DVC's locks: the flow's stage names its
    PID and waits for it, or, past the timeout, fails once naming it (PipelineBusy is not
    retried)."""
    (tmp_path / "dvc.yaml").write_text(
        "stages:\n  slow:\n    cmd: python -c \"import time; time.sleep(4); "
        "open('out.txt', 'w').write('x')\"\n    outs:\n      - out.txt\n")
    Repo.init(str(tmp_path), no_scm=True).close()
    manual = subprocess.Popen([sys.executable, "-m", "dvc", "repro"], cwd=tmp_path,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not dvc_holders(tmp_path) and manual.poll() is None:
            assert time.monotonic() < deadline, "dvc repro never took its locks"
            time.sleep(0.05)
        holders = dvc_holders(tmp_path)
        assert any(h.startswith(f"PID {manual.pid}: ") for h in holders), holders
        with pytest.raises(PipelineBusy, match=rf"DVC is busy \(.*PID {manual.pid}: .*\) after "
                                               r"0.2 s \(flows.lock_timeout_seconds\)"):
            wait_for_dvc(tmp_path, 0.2, lambda _: None, poll=0.05)
        assert not retried(PipelineBusy("busy"))
        told: list[str] = []
        wait_for_dvc(tmp_path, 60, told.append, poll=0.1)
        assert manual.wait(timeout=60) == 0 and not dvc_holders(tmp_path)
        assert len(told) == 1 and f"PID {manual.pid}" in told[0]
    finally:
        manual.kill()
