"""Flow `full-pipeline`: every stage of dvc.yaml in dependency order, each a named task run."""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from flows.dag import run_order
from flows.publish import publish_report
from flows.stages import run_stage


@flow(name="full-pipeline", log_prints=True)
def full_pipeline(repo_root: str = ".", force: bool = False) -> list[str]:
    """Run the whole DAG like `dvc repro` (`force`: re-run every stage, like `dvc repro -f`)."""
    root = Path(repo_root).resolve()
    stages = run_order(root)
    for stage in stages:
        run_stage(stage, root, force)
    publish_report(root)
    return stages


if __name__ == "__main__":
    full_pipeline()
