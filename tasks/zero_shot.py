"""Stage `zero_shot@<task>` (paper §5, Figure 2 right): every pretraining snapshot, of the
Transformer and of the LSTM, answers a task of `analysis.zero_shot` by its heuristic alone,
without fine-tuning (`gpt1.downstream.zero_shot_eval`), scored on the task's first metric as
fine-tuning scores it."""

from __future__ import annotations

import argparse
import logging
import time

from gpt1.config import Params
from gpt1.errors import InputError
from gpt1.records import TaskStatus, read_record, record_not_run, write_record
from tasks.paths import (
    PRETRAIN_DIR,
    PRETRAIN_LSTM_DIR,
    PRETRAIN_SNAPSHOTS,
    RAW_TASKS,
    ZERO_SHOT_METRICS,
)
from tasks.stage import add_item_arguments, main

log = logging.getLogger("tasks.zero_shot")  # run as __main__: named by its module path

TRUNK_DIRS = {"gpt1": PRETRAIN_DIR, "lstm": PRETRAIN_LSTM_DIR}


def run(params: Params, task: str) -> None:
    started = time.perf_counter()
    cfg = params.analysis.zero_shot
    if task not in cfg.tasks:
        raise InputError(f"task {task!r} is not in analysis.zero_shot.tasks ({sorted(cfg.tasks)})")
    out = ZERO_SHOT_METRICS / f"{task}.json"
    status = read_record(RAW_TASKS / task / "status.json", "ingest", TaskStatus)
    if not status["run"]:
        record_not_run(status["reason"], metrics=out, task=task)
        log.info("%s not run: %s", task, status["reason"])
        return
    # imported only here: a task that did not run answers without torch's seconds of import
    from gpt1.downstream.zero_shot_eval import zero_shot_curves

    metrics = zero_shot_curves(params, task, RAW_TASKS / task, PRETRAIN_DIR / "tokenizer.json",
                               TRUNK_DIRS, PRETRAIN_SNAPSHOTS)
    write_record(out, {**metrics, "seconds": round(time.perf_counter() - started, 1)})


def _task_arg(parser: argparse.ArgumentParser) -> None:
    add_item_arguments(parser, {"task": "a task of analysis.zero_shot.tasks"})


if __name__ == "__main__":
    main("zero_shot", run, extra=_task_arg)
