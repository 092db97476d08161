"""A team shares every artifact through a DVC remote: one clone runs the DAG and pushes, a fresh
clone pulls and has nothing left to compute, then re-runs one task on its own."""

from __future__ import annotations

import compileall
import re
import shutil
import sys
from pathlib import Path

import pytest

from gpt1.corpus.shards import sha256_file
from tests.conftest import Reproduced, dvc, edit_params, run

pytestmark = pytest.mark.e2e

GIT = ["git", "-c", "user.email=test@gpt1.local", "-c", "user.name=gpt1 tests"]


def _ran(output: str) -> list[str]:
    return re.findall(r"Running stage '([^']+)'", output)


def test_a_second_clone_pulls_every_artifact_and_recomputes_nothing(reproduced: Reproduced,
                                                                    tmp_path: Path) -> None:
    tiny_repo = reproduced.repo
    remote = tmp_path / "remote"
    dvc("remote", "add", "--default", "team", str(remote), cwd=tiny_repo)
    assert _ran(reproduced.stdout)[:3] == ["code", "ingest", "clean"]
    run([*GIT, "add", "-A"], tiny_repo)
    run([*GIT, "commit", "-qm", "pipeline run"], tiny_repo)
    pushed = dvc("push", cwd=tiny_repo)
    assert re.search(r"\d+ files? pushed", pushed.stdout), pushed.stdout

    second = tmp_path / "second"
    run(["git", "clone", "-q", str(tiny_repo), str(second)], tmp_path)
    assert not (second / "artifacts").exists()  # git carries dvc.lock, not the artifacts
    dvc("pull", cwd=second)
    for path in ("artifacts/pretrain/model.safetensors", "data/shards/manifest.json",
                 "metrics/finetune/sst2.json", "reports/summary.md"):
        assert sha256_file(second / path) == sha256_file(tiny_repo / path), path
    assert "Data and pipelines are up to date" in dvc("status", cwd=second).stdout
    # a user's shell writes bytecode beside the code, gpt1/presets (the report's dependency)
    # included, with the sources' mtimes in it: DVC must not hash it
    compileall.compile_dir(second / "gpt1", quiet=1)
    assert list((second / "gpt1/presets").glob("__pycache__/*.pyc"))
    assert "Data and pipelines are up to date" in dvc("status", cwd=second).stdout
    assert _ran(dvc("repro", cwd=second).stdout) == []

    # Checkpoints are not pushed: a teammate resumes a run by copying its folder over. Run
    # outside DVC (as torchrun runs it), the stage's new outputs are then recorded by hand.
    assert not (second / "artifacts/checkpoints").exists()
    shutil.copytree(tiny_repo / "artifacts/checkpoints/pretrain",
                    second / "artifacts/checkpoints/pretrain")
    resumed = run([sys.executable, "-m", "tasks.pretrain"], second)
    assert "resumed from the checkpoint of step 20" in resumed.stderr
    weights = "artifacts/pretrain/model.safetensors"
    assert sha256_file(second / weights) == sha256_file(tiny_repo / weights)
    # its metrics may differ (MFU is against a peak measured anew, to 4 decimals) or not:
    # recorded as they are, the stage is up to date either way
    dvc("commit", "-f", "pretrain", cwd=second)
    assert "pretrain:" not in dvc("status", cwd=second).stdout

    # the second clone re-runs one task alone; the first clone's files are untouched
    first_metrics = sha256_file(tiny_repo / "metrics/finetune/sst2.json")
    edit_params(second, **{"tasks.sst2.overrides": {"epochs": 2}})
    rerun = dvc("repro", "finetune@sst2", cwd=second)
    assert _ran(rerun.stdout) == ["ingest", "finetune@sst2"]
    assert sha256_file(tiny_repo / "metrics/finetune/sst2.json") == first_metrics
    assert sha256_file(second / "metrics/finetune/sst2.json") != first_metrics
