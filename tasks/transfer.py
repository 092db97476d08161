"""Stage `transfer@<task>` (paper Figure 2, left): one task (`analysis.transfer.tasks`, at its
train size) fine-tuned from the embeddings and first k pretrained blocks, the rest freshly
initialised, for k = 0 .. n_layer, once per seed (k = 0 is a model that was not pretrained,
k = n_layer the whole of it: where Table 5's `no_pretrain` or `full` cell fine-tunes the task at
that size, the file points to it instead of fine-tuning the same again)."""

from __future__ import annotations

import argparse

from gpt1.config import Params
from gpt1.records import write_record
from tasks.paths import PRETRAIN_DIR, RAW_TASKS, TRANSFER_METRICS
from tasks.stage import add_item_arguments, ingested_rows, main


def run(params: Params, task: str) -> None:
    out = TRANSFER_METRICS / f"{task}.json"
    if ingested_rows(task, params.analysis.transfer.tasks, "analysis.transfer.tasks", out,
                     why_prefix=f"task {task}: ", task=task) is None:
        return
    # imported only here: a task with no data answers without torch's seconds of import
    from gpt1.jobs.transfer import transfer_cell

    write_record(out, transfer_cell(params, task, RAW_TASKS / task, PRETRAIN_DIR))


def _task_arg(parser: argparse.ArgumentParser) -> None:
    add_item_arguments(parser, {"task": "a task of analysis.transfer.tasks"})


if __name__ == "__main__":
    main("transfer", run, extra=_task_arg)
