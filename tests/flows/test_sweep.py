"""The `sweep` flow for real, as `python -m flows.sweep` runs it on the shared tiny pipeline: its
grid queued as DVC experiments of finetune@<task> and run by DVC's queue, the point landing in
its own experiment with its own knobs, and the task's experiments side by side in the flow's
log; a run interrupted mid-experiment stops DVC's queue workers and what they run, and an
experiment that fails fails the run, naming it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import torch

from tests.conftest import Reproduced, dvc, run

pytestmark = pytest.mark.e2e

GIT = ["git", "-c", "user.email=test@gpt1.local", "-c", "user.name=gpt1 tests"]


@pytest.mark.long
def test_the_flow_runs_a_grid_as_dvc_experiments(reproduced: Reproduced, prefect_api: str,
                                                 tmp_path: Path) -> None:
    repo = reproduced.repo
    run([*GIT, "add", "-A"], repo)
    run([*GIT, "commit", "-qm", "reproduced"], repo)  # the experiments' baseline
    prefect = {"PREFECT_API_URL": prefect_api, "PREFECT_HOME": str(tmp_path / "prefect")}
    _interrupted_mid_experiment(repo, prefect)
    # two points, one at a time (two at once is DVC's, tested with docs/experiments.md in
    # test_docs); the second asks for CUDA, which this machine lacks where the suite runs (CI):
    # its experiment fails, and so does the flow run, naming it, after logging the table
    cuda = torch.cuda.is_available()
    flow = run([sys.executable, "-m", "flows.sweep", "sst2", "lr=0.002", "device=cpu,cuda"],
               repo, env=prefect, timeout=900, check=False)
    output = flow.stdout + flow.stderr
    assert (flow.returncode == 0) is cuda, output
    assert ("1 of 2 experiments failed (" in output) is not cuda, output
    shown = json.loads(dvc("exp", "show", "--json", cwd=repo).stdout)
    baseline = next(commit for commit in shown if commit["rev"] != "workspace")
    trained = [rev["data"]["metrics"]["metrics/finetune/sst2.json"]["data"]["knobs"]
               for exp in baseline["experiments"] for rev in exp["revs"]
               if exp["executor"]["state"] == "success"]
    assert sorted((k["lr"], k["device"]) for k in trained) == [
        (0.002, "cpu"), *([(0.002, "cuda")] if cuda else [])], baseline
    # the table the flow logged: the baseline, the points and the interrupted experiment (a
    # failed one without a score of its own), the knobs that differ
    lines = [line for line in output.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    assert header == ["experiment", "device", "lr", "epochs", "accuracy (dev)", "seeds",
                      "majority class", "best"], lines
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]
    assert sorted((row[1], float(row[2]), int(row[3]), row[4] == "failed") for row in rows) == [
        ("auto", 0.001, 1, False), ("auto", 0.001, 40, True), ("cpu", 0.002, 1, False),
        ("cuda", 0.002, 1, not cuda)], lines
    assert sum(row[-1] == "*" for row in rows) >= 1, lines
    assert [row[0] for row in rows].count("master") == 1, lines


def _experiment_processes(repo: Path) -> list[psutil.Process]:
    """The stages' processes DVC's queue runs in the checkout's temporary workspaces."""
    found = []
    for proc in psutil.process_iter(["cmdline", "cwd"]):
        cmdline, cwd = proc.info["cmdline"] or [], proc.info["cwd"] or ""
        if cwd.startswith(str(repo / ".dvc" / "tmp")) and "tasks.finetune" in cmdline:
            found.append(proc)
    return found


def _interrupted_mid_experiment(repo: Path, env: dict[str, str]) -> None:
    """Ctrl-C while an experiment fine-tunes (40 epochs: long enough to be caught): the flow
    ends, and so does the experiment DVC's queue workers run in the background."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    flow = subprocess.Popen([sys.executable, "-m", "flows.sweep", "sst2", "epochs=40"],
                            cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env={**os.environ, **env, "PATH": path})
    assert flow.stdout is not None
    seen = []
    for line in flow.stdout:
        seen.append(line)
        if "finetune_loop finetune" in line:  # the experiment trains
            break
    assert _experiment_processes(repo), "".join(seen)
    flow.send_signal(signal.SIGINT)
    flow.communicate(timeout=120)
    assert flow.returncode != 0
    deadline = time.monotonic() + 30
    while _experiment_processes(repo) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _experiment_processes(repo), "the experiment ran on after the flow stopped"
    assert "0 active" in dvc("queue", "status", cwd=repo).stdout
