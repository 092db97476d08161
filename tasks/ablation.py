"""Stage `ablation@<variant>-<task>` (paper Table 5): one variant of the model fine-tuned on one
task at each of its train sizes (`analysis.ablation.tasks`), once per seed; every variant with
the same seeds, data and budget. The metrics file holds each train size's figures under
`train_<N>` (`train_all`: every row), in the order `sizes` lists them.

- full: the pretrained Transformer, with the auxiliary LM loss at `finetune.train.lm_coef`;
- no_pretrain: the same architecture from a fresh initialisation seeded by the run's seed;
- no_aux: the pretrained Transformer with λ = 0;
- lstm: the LSTM that stage `pretrain_lstm` pretrained, fine-tuned as the Transformer is.
"""

from __future__ import annotations

import argparse
import json
import logging
from functools import partial
from typing import get_args

from gpt1.atomic import write_text
from gpt1.config import Params, Variant
from gpt1.errors import InputError
from gpt1.model.registry import load_model
from gpt1.model.transfer import transfer_layers
from gpt1.model.trunk import Trunk
from gpt1.records import not_run_reason
from tasks.cells import fine_tune_cell, load_cell
from tasks.paths import ABLATION_METRICS, PRETRAIN_DIR, PRETRAIN_LSTM_DIR
from tasks.stage import main

log = logging.getLogger("tasks.ablation")  # run as __main__: named by its module path


def size_key(size: int | None) -> str:
    """A train size's key in the metrics file: `train_1000`, or `train_all` for every row."""
    return f"train_{'all' if size is None else size}"


def variant_trunk(variant: str, seed: int) -> Trunk:
    """The trunk `variant` fine-tunes with seed `seed`."""
    if variant == "lstm":
        return load_model(PRETRAIN_LSTM_DIR)
    pretrained = load_model(PRETRAIN_DIR)
    return transfer_layers(pretrained, 0, seed) if variant == "no_pretrain" else pretrained


def run(params: Params, variant: str, task: str) -> None:
    if variant not in get_args(Variant):
        raise InputError(f"variant {variant!r}: expected one of {list(get_args(Variant))}")
    if task not in params.analysis.ablation.tasks:
        raise InputError(f"task {task!r} is not in analysis.ablation.tasks "
                         f"({sorted(params.analysis.ablation.tasks)})")
    lstm_missing = not_run_reason(PRETRAIN_LSTM_DIR, "pretrain_lstm") if variant == "lstm" else None
    loaded = (f"the LSTM was not pretrained ({lstm_missing})" if lstm_missing is not None
              else load_cell(params, task))
    out = ABLATION_METRICS / variant / f"{task}.json"
    head = {"variant": variant, "task": task}
    if isinstance(loaded, str):
        write_text(out, json.dumps({**head, "run": False, "reason": loaded}, indent=2) + "\n")
        log.info("%s on %s not run: %s", variant, task, loaded)
        return
    sizes = {}
    for size in params.analysis.ablation.tasks[task]:
        result = fine_tune_cell(params, loaded.at_size(size), partial(variant_trunk, variant),
                                lm_coef=0.0 if variant == "no_aux" else None)
        sizes[size_key(size)] = {"max_train_examples": size, **result}
        metric = loaded.spec.metrics[0]
        log.info("%s on %s, %s train examples: %s %s (median over seeds %s)", variant, task,
                 result["train_examples"], metric, result[metric], params.analysis.seeds)
    write_text(out, json.dumps({**head, "run": True, "sizes": list(sizes), **sizes}, indent=2)
               + "\n")


def _cell_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--variant", required=True, help=f"one of {list(get_args(Variant))}")
    parser.add_argument("--task", required=True, help="a task of analysis.ablation.tasks")


if __name__ == "__main__":
    main("ablation", run, extra=_cell_args)
