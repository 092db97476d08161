"""Stage `transfer`'s job (paper Figure 2, left): a task fine-tuned from the first k pretrained
blocks, for every k (`gpt1.downstream.cells`)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from gpt1.config import Params
from gpt1.downstream.cells import ablation_ends, cell_facts, fine_tune_cell, load_cell
from gpt1.errors import InputError
from gpt1.model.registry import load_model
from gpt1.model.transfer import transfer_layers
from gpt1.model.transformer import GPT1

log = logging.getLogger(__name__)

# what every k of `transfer_cell` shares, said once in its file; each k's figures are under
# `layers_<k>`
SHARED = ("train_examples", "eval_examples", "lm_coef", "metrics", "seeds")


def transfer_cell(params: Params, task: str, task_dir: Path, pretrained: Path) -> dict[str, Any]:
    """`task` at its train size (`analysis.transfer.tasks`) fine-tuned from the embeddings and
    first k blocks of the GPT-1 in `pretrained`, the rest freshly initialised, for k = 0 ..
    n_layer, once per seed: what every k shares (`SHARED`) once, each k under `layers_<k>`. An
    end that an ablation cell fine-tunes already (`ablation_ends`) is not fine-tuned twice: its
    entry names that variant (`from_ablation`), whose file holds its runs."""
    max_train = params.analysis.transfer.tasks[task]
    cell = load_cell(params, task, task_dir, pretrained).at_size(max_train)
    model = load_model(pretrained)
    if not isinstance(model, GPT1):
        raise InputError(f"{pretrained}: layers are transferred from a GPT-1 model, not a "
                         f"{model.config.model_type}")
    n_layer = model.config.n_layer
    reused = ablation_ends(params.analysis.ablation, task, max_train, n_layer)
    layers = {}
    metric = cell.spec.metrics[0]
    for k in range(n_layer + 1):
        if k in reused:
            layers[f"layers_{k}"] = {"k": k, "from_ablation": reused[k]}
            log.info("%s, %d of %d blocks transferred: as ablation@%s-%s", task, k, n_layer,
                     reused[k], task)
            continue
        result = fine_tune_cell(params, cell, lambda seed, k=k: transfer_layers(model, k, seed))
        layers[f"layers_{k}"] = {"k": k, **{key: value for key, value in result.items()
                                            if key not in SHARED}}
        log.info("%s, %d of %d blocks transferred: %s %s (median over seeds)", task, k, n_layer,
                 metric, result[metric])
    return {"task": task, "run": True, "max_train_examples": max_train,
            **cell_facts(params, cell), "n_layer": n_layer, **layers}
