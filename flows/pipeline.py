"""What every flow does: run stages of the DVC graph in order, one run per checkout at a time,
then publish the report."""

from __future__ import annotations

from pathlib import Path

from prefect import runtime
from prefect.logging import get_run_logger

from flows.dag import rerun_order, run_order, upstream_order
from flows.lock import pipeline_lock
from flows.publish import publish_report
from flows.stages import stage_runner
from gpt1.config import load_params
from gpt1.dag import prepare as prepare_dag


def run_stages(repo_root: Path, target: str | None = None, force: bool = False) -> dict[str, bool]:
    """Bring `target` (every stage, when None) up to date, each stage a task run, holding the
    checkout's flow lock; then the report's artifacts. `force` re-runs `target` (every stage,
    when None) even if unchanged. Returns stage -> whether it ran.

    The stages are read from dvc.yaml only once the lock is held: a run that holds it rewrites
    dvc.lock in place with each stage, and DVC reading it meanwhile can fail on a partial file."""
    params = load_params(repo_root / "params.yaml")
    logger = get_run_logger()
    run_stage = stage_runner(params.flows)
    name = f"flow run {runtime.flow_run.flow_name}/{runtime.flow_run.name}"
    with pipeline_lock(repo_root, params.flows.lock_timeout_seconds, name, logger.warning):
        prepare_dag(repo_root, params)  # the stages DVC declares follow params.yaml as it is now
        stages = run_order(repo_root) if target is None else rerun_order(repo_root, target)
        forced = set() if not force else set(stages) if target is None else {target}
        ran = {stage: run_stage(stage, repo_root, stage in forced,
                                params.flows.lock_timeout_seconds) for stage in stages}
        publish_report(repo_root, params, ran)
    logger.info("stages run: %s", ", ".join(s for s, did in ran.items() if did) or "none")
    return ran


def run_upstream(repo_root: Path, target: str) -> dict[str, bool]:
    """Bring `target` and the stages it needs up to date (each only if it changed, as `dvc
    repro <target>` does), holding the checkout's flow lock; nothing downstream of it runs and
    no report is published. Returns stage -> whether it ran."""
    params = load_params(repo_root / "params.yaml")
    logger = get_run_logger()
    run_stage = stage_runner(params.flows)
    name = f"flow run {runtime.flow_run.flow_name}/{runtime.flow_run.name}"
    with pipeline_lock(repo_root, params.flows.lock_timeout_seconds, name, logger.warning):
        prepare_dag(repo_root, params)
        return {stage: run_stage(stage, repo_root, False, params.flows.lock_timeout_seconds)
                for stage in upstream_order(repo_root, target)}
