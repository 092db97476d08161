"""Flow `finetune`: re-run one task's fine-tune (and the report), as `dvc repro finetune@<task>`."""

from __future__ import annotations

import argparse
from pathlib import Path

from prefect import flow

from flows.dag import rerun_order
from flows.publish import publish_report
from flows.stages import run_stage


@flow(name="finetune", log_prints=True)
def finetune(task: str, repo_root: str = ".", force: bool = False) -> list[str]:
    """Bring `finetune@<task>` up to date (`force`: re-run it even if unchanged), then the
    report; upstream stages run only if something they depend on changed."""
    root = Path(repo_root).resolve()
    target = f"finetune@{task}"
    stages = rerun_order(root, target)
    for stage in stages:
        run_stage(stage, root, force and stage == target)
    publish_report(root)
    return stages


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m flows.finetune")
    parser.add_argument("task")
    parser.add_argument("--force", action="store_true")
    args = parser.parse_args()
    finetune(args.task, force=args.force)
