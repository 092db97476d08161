"""Flow `sweep`: a grid over one task's fine-tuning knobs, run as DVC experiments of
`finetune@<task>` (what `gpt1 sweep` queues, run by `dvc exp run --run-all`), then the task's
experiments side by side as the table artifact `gpt1-sweep`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from prefect import flow, runtime, task
from prefect.artifacts import create_table_artifact
from prefect.logging import get_run_logger

from flows.cli import check_task, parser, run_flow
from flows.lock import pipeline_lock
from gpt1.config import load_params
from gpt1.errors import InputError
from gpt1.sweep import (
    check_grid,
    parse_grid,
    points,
    queue_command,
    run_command,
    sweep_runs,
    sweep_table,
    table_text,
)


class ExperimentsFailed(RuntimeError):
    """Experiments of the sweep failed in DVC's queue."""


def _dvc(command: list[str], root: Path) -> None:
    """`dvc <args>` in `root`, its output logged line by line as it comes. A DVC that fails
    raises, with its last lines. Stopping the flow run (cancel, Ctrl-C) stops the queue's
    workers and the experiments they run, as `dvc queue stop --kill` does."""
    logger = get_run_logger()
    cmd = [sys.executable, "-m", "dvc", *command[1:]]
    logger.info("$ %s", " ".join(command))
    proc = subprocess.Popen(cmd, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, bufsize=1)
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip())
            logger.info(line.rstrip())
        proc.wait()
    except BaseException:
        proc.terminate()
        proc.wait()
        subprocess.run([sys.executable, "-m", "dvc", "queue", "stop", "--kill"], cwd=root,
                       check=False, capture_output=True)
        raise
    finally:
        if proc.stdout is not None:
            proc.stdout.close()
    if proc.returncode:
        raise RuntimeError(f"{' '.join(command)} exited {proc.returncode}:\n"
                           + "\n".join(lines[-20:]))


def _dvc_output(args: list[str], root: Path) -> str:
    """What `dvc <args>` in `root` prints (a query: nothing to log or to stop)."""
    return subprocess.run([sys.executable, "-m", "dvc", *args], cwd=root, capture_output=True,
                          text=True, check=True).stdout


def _failed(root: Path) -> set[str]:
    """The queue's failed entries (`dvc queue status`: task, name, created, status), as
    `task name`."""
    status = _dvc_output(["queue", "status"], root)
    return {" ".join(line.split()[:2]) for line in status.splitlines()
            if line.split()[-1:] == ["Failed"]}


@task(task_run_name="queue-{task_name}")
def queue(task_name: str, grid: dict[str, list[Any]], root: Path) -> None:
    """One queued DVC experiment of finetune@<task> per point of the grid."""
    _dvc(queue_command(task_name, grid), root)


@task(task_run_name="run-queue")
def run_queue(n_points: int, jobs: int | None, root: Path) -> None:
    """DVC's queue run to its end, `jobs` experiments at a time."""
    _dvc(run_command(n_points, jobs), root)


@flow(name="sweep", log_prints=True)
def sweep(task: str, grid: dict[str, list[Any]], jobs: int | None = None) -> list[dict]:
    """Fine-tune `task` once per point of `grid` (a knob of finetune.train -> the values to
    try, e.g. {"lr": [0.0005, 0.002], "epochs": [2, 3]}), each point a DVC experiment of the
    checkout this runs in, `jobs` at a time (default: one per two cores); then publish the
    task's experiments side by side (`gpt1 sweep <task> --show`) and return its rows. A bad
    grid is refused before anything is queued. The checkout must have a commit: the
    experiments' baseline."""
    root = Path.cwd()
    check_task(root, task)
    params = load_params(root / "params.yaml")
    checked = check_grid(params, task, grid)
    if jobs is not None and jobs < 1:
        raise InputError(f"jobs: {jobs}; run at least 1 experiment at a time")
    n_points = len(points(checked))
    logger = get_run_logger()
    name = f"flow run {runtime.flow_run.flow_name}/{runtime.flow_run.name}"
    with pipeline_lock(root, params.flows.lock_timeout_seconds, name, logger.warning):
        failed_before = _failed(root)
        queue(task, checked, root)
        run_queue(n_points, jobs, root)
        failed = sorted(_failed(root) - failed_before)
        shown = _dvc_output(["exp", "show", "--json"], root)
    metric = params.tasks[task].metrics[0]
    table = sweep_table(sweep_runs(json.loads(shown), task, metric), metric)
    print(f"{task}'s experiments:\n{table_text(table)}")  # the table on lines of its own
    rows = table.to_dicts()
    create_table_artifact(table=rows, key="gpt1-sweep",
                          description=f"{task}: each experiment's dev {metric} beside the "
                                      "majority class, the best marked")
    if failed:
        raise ExperimentsFailed(f"{len(failed)} of {n_points} experiments failed "
                                f"({', '.join(failed)}); their logs: dvc queue logs <task>")
    return rows


if __name__ == "__main__":
    command = parser("flows.sweep", __doc__)
    command.add_argument("task", help="a fine-tuned task of params.yaml")
    command.add_argument("grid", nargs="+", help="KEY=VALUE,VALUE... per knob of "
                         "finetune.train, e.g. lr=0.0005,0.001 epochs=2,3")
    command.add_argument("-j", "--jobs", type=int,
                         help="experiments at a time (default: one per two cores)")
    args = command.parse_args()
    root = Path.cwd()

    def grid() -> dict[str, list[Any]]:
        check_task(root, args.task)
        return parse_grid(load_params(root / "params.yaml"), args.task, args.grid)

    run_flow(lambda: sweep(args.task, grid(), args.jobs), grid)
