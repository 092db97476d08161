"""The Prefect `full-pipeline` flow runs the DVC stage graph and leaves DVC exactly as
`dvc repro` would."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from flows.dag import rerun_order, run_order
from gpt1.config import load_params
from tests.conftest import REPO, dvc, run

pytestmark = pytest.mark.e2e


def test_stage_order_comes_from_dvc_yaml() -> None:
    order = run_order(REPO)
    finetunes = [f"finetune@{task}" for task in load_params(REPO / "params.yaml").tasks]
    assert order == ["ingest", "clean", "bpe", "tokenize", "pretrain", *finetunes, "report"]
    assert rerun_order(REPO, "finetune@sst2") == ["ingest", "clean", "bpe", "tokenize",
                                                  "pretrain", "finetune@sst2", "report"]
    with pytest.raises(ValueError, match="no stage 'finetune@nope'"):
        rerun_order(REPO, "finetune@nope")


def test_full_pipeline_flow_leaves_dvc_clean(tiny_repo: Path, tmp_path: Path) -> None:
    env = {"PREFECT_HOME": str(tmp_path / "prefect"), "PREFECT_API_URL": ""}
    proc = run([sys.executable, "-m", "flows.full_pipeline"], tiny_repo, env=env)
    log = proc.stdout + proc.stderr
    for stage in run_order(tiny_repo):
        assert f"Task run '{stage}' - Finished in state Completed()" in log
    assert "Flow run" in log and "Finished in state Completed()" in log
    assert (tiny_repo / "reports" / "summary.md").is_file()
    assert (tiny_repo / "dvc.lock").is_file()
    assert "Data and pipelines are up to date." in dvc("status", cwd=tiny_repo).stdout
    # and `dvc repro` agrees that there is nothing left to do
    assert "Running stage" not in dvc("repro", cwd=tiny_repo).stdout
