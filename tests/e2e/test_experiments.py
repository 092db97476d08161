"""A sweep as DVC experiments, run for real on the tiny pipeline: `gpt1 sweep` queues one DVC
experiment of finetune@<task> per point, `dvc queue start -j 2` runs two at once in DVC's
temporary workspaces, and each lands in its own experiment: its metrics come from a run with
its own learning rate (the metrics file says what it trained with), `dvc plots diff` draws
their fine-tuning curves together and `gpt1 sweep --show` sets them side by side. The stages'
shell works there: DVC names the original checkout in DVC_ROOT, while the stage runs in the
temporary one."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import Reproduced, dvc, run

pytestmark = [pytest.mark.e2e, pytest.mark.heavy]

GIT = ["git", "-c", "user.email=test@gpt1.local", "-c", "user.name=gpt1 tests"]


def _gpt1(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return run([sys.executable, "-m", "gpt1.cli", *args], repo, check=False)


def test_a_sweep_runs_two_at_a_time_and_each_lands_in_its_own_experiment(
        reproduced: Reproduced) -> None:
    repo = reproduced.repo
    run([*GIT, "add", "-A"], repo)
    run([*GIT, "commit", "-qm", "reproduced"], repo)  # the baseline, as a user commits it

    queued = _gpt1(repo, "sweep", "sst2", "lr=0.0005,0.002")
    assert queued.returncode == 0, queued.stderr
    assert ("dvc exp run --queue -S ++tasks.sst2.overrides.lr=0.0005,0.002 finetune@sst2"
            in queued.stdout)
    assert "queued 2 experiments of finetune@sst2; run them: dvc queue start -j " in queued.stdout

    dvc("queue", "start", "-j", "2", cwd=repo)
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        status = dvc("queue", "status", cwd=repo).stdout
        if "Queued" not in status and "Running" not in status:
            break
        time.sleep(3)
    assert status.count("Success") == 2, status

    shown = json.loads(dvc("exp", "show", "--json", cwd=repo).stdout)
    baseline = next(commit for commit in shown if commit["rev"] != "workspace")
    experiments = [rev for exp in baseline["experiments"] for rev in exp["revs"]]
    by_lr = {}
    for exp in experiments:
        overrides = exp["data"]["params"]["params.yaml"]["data"]["tasks"]["sst2"]["overrides"]
        metrics = exp["data"]["metrics"]["metrics/finetune/sst2.json"]["data"]
        # the experiment's metrics come from a run with its own learning rate
        assert metrics["knobs"]["lr"] == overrides["lr"], (exp["name"], metrics["knobs"])
        assert "accuracy" in metrics
        by_lr[overrides["lr"]] = exp["name"]
    assert sorted(by_lr) == [0.0005, 0.002]

    # the two runs' fine-tuning curves, side by side as `dvc plots diff` draws them
    plots = json.loads(dvc("plots", "diff", "--json", *by_lr.values(), cwd=repo).stdout)
    (curve,) = plots["data"]["metrics/finetune_curves/sst2.tsv"]
    assert set(curve["revisions"]) == set(by_lr.values())
    points = curve["content"]["data"]["values"]
    assert {p["rev"] for p in points} == set(by_lr.values())
    assert all({"epoch", "dev", "train_loss"} <= p.keys() for p in points)

    table = _gpt1(repo, "sweep", "sst2", "--show")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split("|")[1:-1] == [" experiment ", " lr     ", " accuracy (dev) ",
                                         " seeds ", " majority class ", " best "], lines[0]
    rows = [[cell.strip() for cell in line.split("|")[1:-1]] for line in lines[2:]]
    assert {row[0] for row in rows} == {"master", *by_lr.values()}
    best = max(float(row[2].split()[0]) for row in rows)
    assert [row[0] for row in rows if row[-1] == "*"] == [
        row[0] for row in rows if float(row[2].split()[0]) == best], table.stdout  # ties: all
    assert all(row[4] for row in rows)  # the majority class beside every point
