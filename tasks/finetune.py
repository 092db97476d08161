"""Stage `finetune@<task>`: fine-tune the pretrained model on one task once per seed, score every
dev split, and keep the model and predictions of the median seed."""

from __future__ import annotations

import argparse
import json
import logging

from gpt1.atomic import write_text
from gpt1.config import Params
from gpt1.errors import InputError
from gpt1.records import write_not_run
from tasks.paths import FINETUNE_DIR, FINETUNE_METRICS, PRETRAIN_DIR, RAW_TASKS
from tasks.stage import main

log = logging.getLogger("tasks.finetune")  # run as __main__: named by its module path


def record_not_run(name: str, reason: str) -> None:
    write_not_run(FINETUNE_DIR / name, reason)
    write_text(FINETUNE_METRICS / f"{name}.json",
               json.dumps({"task": name, "run": False, "reason": reason}, indent=2) + "\n")
    log.info("%s not run: %s", name, reason)


def run(params: Params, task: str) -> None:
    if task not in params.tasks:
        raise InputError(f"task {task!r} is not in the task registry (tasks: "
                         f"{sorted(params.tasks)})")
    status = json.loads((RAW_TASKS / task / "status.json").read_text())
    if not status["run"]:
        record_not_run(task, status["reason"])
        return
    # imported only here: a task that did not run answers without torch's seconds of import,
    # which most of the registry's stages pay for nothing on the bundled sample
    from gpt1.downstream.tuning import finetune_task

    metrics = finetune_task(params, task, list(status["rows"]), RAW_TASKS / task, PRETRAIN_DIR,
                            FINETUNE_DIR / task)
    write_text(FINETUNE_METRICS / f"{task}.json", json.dumps(metrics, indent=2) + "\n")


def _task_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--task", required=True, help="a task of the registry (params tasks)")


if __name__ == "__main__":
    main("finetune", run, extra=_task_arg)
