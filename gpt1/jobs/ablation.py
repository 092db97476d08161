"""Stage `ablation`'s job (paper Table 5): one cell, a variant of the model (the full one,
without pretraining, without the auxiliary LM loss, the LSTM) fine-tuned on a task at each of
its train sizes (`gpt1.downstream.cells`)."""

from __future__ import annotations

import logging
from functools import partial
from pathlib import Path
from typing import Any

from gpt1.config import Params
from gpt1.downstream.cells import fine_tune_cell, load_cell, size_key
from gpt1.model.registry import load_model
from gpt1.model.transfer import transfer_layers
from gpt1.model.trunk import Trunk

log = logging.getLogger(__name__)


def variant_trunk(variant: str, pretrained: Path, lstm: Path, seed: int) -> Trunk:
    """The trunk ablation `variant` fine-tunes with seed `seed`: the LSTM in `lstm`, or the
    Transformer in `pretrained` (freshly initialised by the seed for `no_pretrain`)."""
    if variant == "lstm":
        return load_model(lstm)
    model = load_model(pretrained)
    return transfer_layers(model, 0, seed) if variant == "no_pretrain" else model


def ablation_cell(params: Params, variant: str, task: str, task_dir: Path, pretrained: Path,
                  lstm: Path) -> dict[str, Any]:
    """Ablation `variant` fine-tuned on `task` at each of its train sizes
    (`analysis.ablation.tasks`), once per seed, λ = 0 for `no_aux`: each size's figures under
    `size_key(size)`, in the order `sizes` lists them."""
    cell = load_cell(params, task, task_dir, pretrained)
    sizes = {}
    for size in params.analysis.ablation.tasks[task]:
        result = fine_tune_cell(params, cell.at_size(size),
                                partial(variant_trunk, variant, pretrained, lstm),
                                lm_coef=0.0 if variant == "no_aux" else None)
        sizes[size_key(size)] = {"max_train_examples": size, **result}
        metric = cell.spec.metrics[0]
        log.info("%s on %s, %s train examples: %s %s (median over seeds %s)", variant, task,
                 result["train_examples"], metric, result[metric], params.analysis.seeds)
    return {"variant": variant, "task": task, "run": True, "sizes": list(sizes), **sizes}
