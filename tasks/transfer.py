"""Stage `transfer@<task>` (paper Figure 2, left): one task (`analysis.transfer.tasks`, at its
train size) fine-tuned from the
embeddings and first k pretrained blocks, the rest freshly initialised, for k = 0 .. n_layer,
once per seed (k = 0 is a model that was not pretrained, k = n_layer the whole of it)."""

from __future__ import annotations

import argparse
import json
import logging

from gpt1.atomic import write_text
from gpt1.config import Params
from gpt1.errors import InputError
from gpt1.model.registry import load_model
from gpt1.model.transfer import transfer_layers
from gpt1.model.transformer import GPT1
from tasks.cells import fine_tune_cell, load_cell
from tasks.paths import PRETRAIN_DIR, TRANSFER_METRICS
from tasks.stage import main

log = logging.getLogger("tasks.transfer")  # run as __main__: named by its module path

# what every k shares, said once in the file; each k's figures are under `layers_<k>`
SHARED = ("train_examples", "eval_examples", "lm_coef", "metrics", "seeds")


def run(params: Params, task: str) -> None:
    if task not in params.analysis.transfer.tasks:
        raise InputError(f"task {task!r} is not in analysis.transfer.tasks "
                         f"({sorted(params.analysis.transfer.tasks)})")
    loaded = load_cell(params, task)
    out = TRANSFER_METRICS / f"{task}.json"
    if isinstance(loaded, str):
        write_text(out, json.dumps({"task": task, "run": False, "reason": loaded}, indent=2)
                   + "\n")
        log.info("%s not run: %s", task, loaded)
        return
    cell = loaded.at_size(params.analysis.transfer.tasks[task])
    pretrained = load_model(PRETRAIN_DIR)
    if not isinstance(pretrained, GPT1):
        raise InputError(f"{PRETRAIN_DIR}: layers are transferred from a GPT-1 model, not a "
                         f"{pretrained.config.model_type}")
    n_layer = pretrained.config.n_layer
    layers, shared = {}, {}
    metric = cell.spec.metrics[0]
    for k in range(n_layer + 1):
        result = fine_tune_cell(params, cell,
                                lambda seed, k=k: transfer_layers(pretrained, k, seed))
        shared = {key: result.pop(key) for key in SHARED}  # the same for every k
        layers[f"layers_{k}"] = {"k": k, **result}
        log.info("%s, %d of %d blocks transferred: %s %s (median over seeds)", task, k, n_layer,
                 metric, result[metric])
    write_text(out, json.dumps({"task": task, "run": True,
                                "max_train_examples": params.analysis.transfer.tasks[task],
                                **shared, "n_layer": n_layer, **layers}, indent=2) + "\n")


def _task_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--task", required=True, help="a task of analysis.transfer.tasks")


if __name__ == "__main__":
    main("transfer", run, extra=_task_arg)
