"""A flow run that meets bad input fails at once, saying why: the stage is not retried; a bug
keeps its traceback and is retried."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from flows.dag import run_order
from tests.conftest import copy_repo, edit_params, run

pytestmark = pytest.mark.e2e


def test_bad_input_fails_the_flow_without_retries(tmp_path: Path) -> None:
    """As a user first runs it: no PREFECT_API_URL, so the flow starts Prefect's temporary
    server (the other flow tests share one server, `prefect_api`, for speed)."""
    repo = copy_repo(tmp_path / "repo")
    lock = repo / "dvc.lock"  # there when the checkout copied has run the pipeline
    lock_before = lock.read_bytes() if lock.exists() else None
    edit_params(repo, **{"ingest.corpus": ["missing/*.txt"], "flows.retries": 2,
                         "flows.retry_delay_seconds": 0})
    proc = run([sys.executable, "-m", "flows.full_pipeline"], repo, check=False,
               env={"PREFECT_HOME": str(tmp_path / "prefect"), "PREFECT_API_URL": ""})
    log = proc.stdout + proc.stderr
    assert proc.returncode != 0, log
    assert log.count("Running stage 'ingest'") == 1, log  # run once, not retried
    why = "no corpus file under gpt1/sample_data matches ingest.corpus ['missing/*.txt']"
    failed = f"StageFailed: stage ingest failed with exit code 2: {why}"
    assert "Task run 'ingest' - Finished in state Failed(" in log, log
    assert f"Task run encountered an exception {failed}" in log, log  # the task run's state
    assert f"Flow run encountered an exception: {failed}" in log, log  # the flow run's
    for later in run_order(repo)[1:]:
        assert f"Task run '{later}'" not in log, log
    assert (lock.read_bytes() if lock.exists() else None) == lock_before  # DVC recorded nothing


def test_a_bug_keeps_its_traceback_and_is_retried(tmp_path: Path, prefect_api: str) -> None:
    """A ValueError from inside a stage's code (injected into the copy's ingest) is a bug: its
    traceback reaches the flow's log, it exits 1, and the flow retries it once (flows.retries)."""
    repo = copy_repo(tmp_path / "repo")
    stage = repo / "tasks" / "ingest.py"
    source = stage.read_text()
    assert source.count("\ndef run(") == 1
    head, _, rest = source.partition("\ndef run(")
    signature, _, body = rest.partition("\n")
    stage.write_text(f"{head}\ndef run({signature}\n    raise ValueError('an injected bug')\n"
                     f"{body}")
    edit_params(repo, **{"flows.retries": 1, "flows.retry_delay_seconds": 0})
    proc = run([sys.executable, "-m", "flows.full_pipeline"], repo, check=False,
               env={"PREFECT_HOME": str(tmp_path / "prefect"), "PREFECT_API_URL": prefect_api})
    log = proc.stdout + proc.stderr
    assert proc.returncode != 0, log
    assert log.count("Running stage 'ingest'") == 2, log  # run, then retried once
    assert log.count("ValueError: an injected bug") == 2, log  # each run's traceback
    assert "Traceback (most recent call last)" in log, log
    failed = "StageFailed: stage ingest failed with exit code 1: ValueError('an injected bug')"
    assert f"Flow run encountered an exception: {failed}" in log, log
