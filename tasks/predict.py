"""Stage `predict@<task>`: the fine-tuned model of a task scores the file its registry entry
declares as `files.predict` (under ingest.root), every row with its prediction, into
`predictions/<task>.parquet`; a new batch of data is scored reproducibly."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from gpt1.config import PREDICT_SPLIT, Params
from gpt1.errors import MissingInputError
from gpt1.records import not_run_reason, write_not_run_table
from tasks.paths import FINETUNE_DIR, PREDICTIONS
from tasks.stage import add_item_arguments, main

log = logging.getLogger("tasks.predict")  # run as __main__: named by its module path


def run(params: Params, task: str) -> None:
    out = PREDICTIONS / f"{task}.parquet"
    source = params.task(task).files.get(PREDICT_SPLIT)
    reason = ("no files.predict in its registry entry" if source is None
              else not_run_reason(FINETUNE_DIR / task, "finetune@" + task))
    if reason is not None:
        write_not_run_table(out, reason)
        log.info("%s not predicted: %s", task, reason)
        return
    # imported only here: a task with nothing to predict answers without torch's import
    from gpt1.jobs.predict import predict_file

    path = Path(params.ingest.root) / str(source)
    if not path.exists():
        raise MissingInputError(f"tasks.{task}.files.{PREDICT_SPLIT}: {path}: no such file (the "
                                "file this stage scores): put it back, or remove the key")
    train = params.finetune.train
    predict_file(FINETUNE_DIR / task, path, out,
                 batch_size=train.batch_size, device=train.device, precision=train.precision)


def _task_arg(parser: argparse.ArgumentParser) -> None:
    add_item_arguments(parser, {"task": "a task of the registry (params tasks)"})


if __name__ == "__main__":
    main("predict", run, extra=_task_arg)
