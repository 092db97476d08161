"""Stage `zero_shot@<task>` (paper §5, Figure 2 right): every pretraining snapshot, of the
Transformer and of the LSTM, answers a task of `analysis.zero_shot` by its heuristic alone,
without fine-tuning (`gpt1.jobs.zero_shot`), scored on the task's first metric as
fine-tuning scores it."""

from __future__ import annotations

import argparse

from gpt1.config import Params
from gpt1.records import write_record
from tasks.paths import (
    PRETRAIN_DIR,
    PRETRAIN_LSTM_DIR,
    PRETRAIN_SNAPSHOTS,
    RAW_TASKS,
    ZERO_SHOT_METRICS,
)
from tasks.stage import add_item_arguments, ingested_rows, main

TRUNK_DIRS = {"gpt1": PRETRAIN_DIR, "lstm": PRETRAIN_LSTM_DIR}


def run(params: Params, task: str) -> None:
    out = ZERO_SHOT_METRICS / f"{task}.json"
    if ingested_rows(task, params.analysis.zero_shot.tasks, "analysis.zero_shot.tasks", out,
                     task=task) is None:
        return
    # imported only here: a task that did not run answers without torch's seconds of import
    from gpt1.jobs.zero_shot import zero_shot_curves

    write_record(out, zero_shot_curves(params, task, RAW_TASKS / task,
                                       PRETRAIN_DIR / "tokenizer.json", TRUNK_DIRS,
                                       PRETRAIN_SNAPSHOTS))


def _task_arg(parser: argparse.ArgumentParser) -> None:
    add_item_arguments(parser, {"task": "a task of analysis.zero_shot.tasks"})


if __name__ == "__main__":
    main("zero_shot", run, extra=_task_arg)
