"""Stage `finetune@<task>` (paper §3.2): the pretrained model fine-tuned on one registry task,
once per seed (`gpt1.jobs.finetune`); a task ingest found no data for records why not."""

from __future__ import annotations

import argparse

from gpt1.config import Params
from gpt1.records import write_curve, write_record
from tasks.paths import FINETUNE_CURVES, FINETUNE_DIR, FINETUNE_METRICS, PRETRAIN_DIR, RAW_TASKS
from tasks.stage import add_item_arguments, ingested_rows, main


def run(params: Params, task: str) -> None:
    out, curve = FINETUNE_METRICS / f"{task}.json", FINETUNE_CURVES / f"{task}.tsv"
    rows = ingested_rows(task, params.tasks, "tasks", out, folders=(FINETUNE_DIR / task,),
                         task=task)
    if rows is None:
        write_curve(curve, [])
        return
    # imported only here: a task that did not run answers without torch's seconds of import,
    # which most of the registry's stages pay for nothing on the bundled sample
    from gpt1.jobs.finetune import finetune_task

    write_record(out, finetune_task(params, task, list(rows), RAW_TASKS / task, PRETRAIN_DIR,
                                    FINETUNE_DIR / task, curve))


def _task_arg(parser: argparse.ArgumentParser) -> None:
    add_item_arguments(parser, {"task": "a task of the registry (params tasks)"})


if __name__ == "__main__":
    main("finetune", run, extra=_task_arg)
