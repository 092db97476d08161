"""What every flow does: run stages of the DVC graph in order, one run per checkout at a time,
then publish the report."""

from __future__ import annotations

from pathlib import Path

from prefect import runtime
from prefect.logging import get_run_logger

from flows.lock import pipeline_lock
from flows.publish import publish_report
from flows.stages import stage_runner
from gpt1.config import load_params


def run_stages(repo_root: Path, stages: list[str], forced: set[str]) -> dict[str, bool]:
    """Each of `stages` as a task run (those in `forced` re-run even if unchanged), holding the
    checkout's flow lock; then the report's artifacts. Returns stage -> whether it ran."""
    params = load_params(repo_root / "params.yaml")
    logger = get_run_logger()
    run_stage = stage_runner(params.flows)
    name = f"flow run {runtime.flow_run.flow_name}/{runtime.flow_run.name}"
    with pipeline_lock(repo_root, params.flows.lock_timeout_seconds, name, logger.warning):
        ran = {stage: run_stage(stage, repo_root, stage in forced) for stage in stages}
        publish_report(repo_root, params, ran)
    logger.info("stages run: %s", ", ".join(s for s, did in ran.items() if did) or "none")
    return ran
