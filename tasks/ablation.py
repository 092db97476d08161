"""Stage `ablation@<variant>-<task>` (paper Table 5): one variant of the model fine-tuned on one
task at each of its train sizes (`analysis.ablation.tasks`), once per seed; every variant with
the same seeds, data and budget. The metrics file holds each train size's figures under
`train_<N>` (`train_all`: every row), in the order `sizes` lists them.

- full: the pretrained Transformer, with the auxiliary LM loss at `finetune.train.lm_coef`;
- no_pretrain: the same architecture from a fresh initialisation seeded by the run's seed;
- no_aux: the pretrained Transformer with λ = 0;
- lstm: the LSTM that stage `pretrain_control@lstm` pretrained, fine-tuned as the Transformer is.
"""

from __future__ import annotations

import argparse
import logging
from typing import get_args

from gpt1.config import Params, Variant
from gpt1.errors import InputError
from gpt1.records import not_run_reason, record_not_run, write_record
from tasks.paths import ABLATION_METRICS, PRETRAIN_DIR, PRETRAIN_LSTM_DIR, RAW_TASKS
from tasks.stage import add_item_arguments, ingested_rows, main

log = logging.getLogger("tasks.ablation")  # run as __main__: named by its module path


def run(params: Params, variant: str, task: str) -> None:
    if variant not in get_args(Variant):
        raise InputError(f"variant {variant!r}: expected one of {list(get_args(Variant))}")
    out = ABLATION_METRICS / variant / f"{task}.json"
    lstm = not_run_reason(PRETRAIN_LSTM_DIR, "pretrain_control@lstm") if variant == "lstm" else None
    if lstm is not None and task in params.analysis.ablation.tasks:
        reason = f"the LSTM was not pretrained ({lstm})"
        record_not_run(reason, metrics=out, variant=variant, task=task)
        log.info("%s on %s not run: %s", variant, task, reason)
        return
    if ingested_rows(task, params.analysis.ablation.tasks, "analysis.ablation.tasks", out,
                     why_prefix=f"task {task}: ", variant=variant, task=task) is None:
        return
    # imported only here: a cell with nothing to do answers without torch's seconds of import
    from gpt1.jobs.ablation import ablation_cell

    write_record(out, ablation_cell(params, variant, task, RAW_TASKS / task, PRETRAIN_DIR,
                                    PRETRAIN_LSTM_DIR))


def _cell_args(parser: argparse.ArgumentParser) -> None:
    add_item_arguments(parser, {"variant": f"one of {list(get_args(Variant))}",
                                "task": "a task of analysis.ablation.tasks"})


if __name__ == "__main__":
    main("ablation", run, extra=_cell_args)
