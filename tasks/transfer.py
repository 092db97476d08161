"""Stage `transfer@<task>` (paper Figure 2, left): one task (`analysis.transfer.tasks`, at its
train size) fine-tuned from the embeddings and first k pretrained blocks, the rest freshly
initialised, for k = 0 .. n_layer, once per seed (k = 0 is a model that was not pretrained,
k = n_layer the whole of it: where Table 5's `no_pretrain` or `full` cell fine-tunes the task at
that size, the file points to it instead of fine-tuning the same again)."""

from __future__ import annotations

import argparse
import logging

from gpt1.config import Params
from gpt1.errors import InputError
from gpt1.records import TaskStatus, read_record, record_not_run, write_record
from tasks.paths import PRETRAIN_DIR, RAW_TASKS, TRANSFER_METRICS
from tasks.stage import add_item_arguments, main

log = logging.getLogger("tasks.transfer")  # run as __main__: named by its module path


def run(params: Params, task: str) -> None:
    if task not in params.analysis.transfer.tasks:
        raise InputError(f"task {task!r} is not in analysis.transfer.tasks "
                         f"({sorted(params.analysis.transfer.tasks)})")
    out = TRANSFER_METRICS / f"{task}.json"
    status = read_record(RAW_TASKS / task / "status.json", "ingest", TaskStatus)
    if not status["run"]:
        reason = f"task {task}: {status['reason']}"
        record_not_run(reason, metrics=out, task=task)
        log.info("%s not run: %s", task, reason)
        return
    # imported only here: a task with no data answers without torch's seconds of import
    from gpt1.downstream.cells import transfer_cell

    write_record(out, transfer_cell(params, task, RAW_TASKS / task, PRETRAIN_DIR))


def _task_arg(parser: argparse.ArgumentParser) -> None:
    add_item_arguments(parser, {"task": "a task of analysis.transfer.tasks"})


if __name__ == "__main__":
    main("transfer", run, extra=_task_arg)
