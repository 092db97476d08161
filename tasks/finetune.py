"""Stage `finetune@<task>`: fine-tune the pretrained model on one task once per seed, score every
dev split, and keep the model and predictions of the median seed."""

from __future__ import annotations

import argparse
import logging

from gpt1.config import Params
from gpt1.records import TaskStatus, read_record, record_not_run, write_record
from tasks.paths import FINETUNE_DIR, FINETUNE_METRICS, PRETRAIN_DIR, RAW_TASKS
from tasks.stage import add_item_arguments, main

log = logging.getLogger("tasks.finetune")  # run as __main__: named by its module path


def run(params: Params, task: str) -> None:
    params.task(task)  # bad input where it is not one
    out = FINETUNE_METRICS / f"{task}.json"
    status = read_record(RAW_TASKS / task / "status.json", "ingest", TaskStatus)
    if not status["run"]:
        record_not_run(status["reason"], folders=(FINETUNE_DIR / task,), metrics=out, task=task)
        log.info("%s not run: %s", task, status["reason"])
        return
    # imported only here: a task that did not run answers without torch's seconds of import,
    # which most of the registry's stages pay for nothing on the bundled sample
    from gpt1.downstream.tuning import finetune_task

    write_record(out, finetune_task(params, task, list(status["rows"]), RAW_TASKS / task,
                                    PRETRAIN_DIR, FINETUNE_DIR / task))


def _task_arg(parser: argparse.ArgumentParser) -> None:
    add_item_arguments(parser, {"task": "a task of the registry (params tasks)"})


if __name__ == "__main__":
    main("finetune", run, extra=_task_arg)
