"""Flow `finetune`: re-run one task's fine-tune (and the report), as `dvc repro finetune@<task>`."""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from flows.cli import check_task, parser, run_flow
from flows.pipeline import run_stages


@flow(name="finetune", log_prints=True)
def finetune(task: str, force: bool = False) -> dict[str, bool]:
    """Bring `finetune@<task>` of the checkout this runs in up to date (`force`: re-run it even
    if unchanged), then the report; upstream stages run only if something they depend on
    changed. Returns stage -> whether it ran."""
    root = Path.cwd()
    check_task(root, task)
    return run_stages(root, f"finetune@{task}", force)


if __name__ == "__main__":
    command = parser("flows.finetune", __doc__)
    command.add_argument("task", help="a task of the registry (params.yaml `tasks`)")
    command.add_argument("--force", action="store_true", help="re-run it even if unchanged")
    args = command.parse_args()
    run_flow(lambda: finetune(args.task, force=args.force),
             lambda: check_task(Path.cwd(), args.task))
