"""The analysis stages' jobs, one cell each: a registry task at one train size (its first N train
rows, and `analysis.max_dev_examples` rows of each eval split) fine-tuned once per seed of
`analysis.seeds`, from a variant of the model (`ablation_cell`, paper Table 5) or from the first
k pretrained blocks for every k (`transfer_cell`, Figure 2 left). Each returns the content of
its metrics file; the stage has checked beforehand that the task has data (ingest's
`status.json`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from gpt1.config import AblationParams, Params, TaskParams, Variant
from gpt1.corpus.bpe import GPT1Tokenizer
from gpt1.downstream.tuning import Split, load_splits, run_seed, summary
from gpt1.errors import InputError
from gpt1.model.registry import load_config, load_model
from gpt1.model.transfer import transfer_layers
from gpt1.model.transformer import GPT1
from gpt1.model.trunk import Trunk

log = logging.getLogger(__name__)

# what every k of `transfer_cell` shares, said once in its file; each k's figures are under
# `layers_<k>`
SHARED = ("train_examples", "eval_examples", "lm_coef", "metrics", "seeds")


@dataclass(frozen=True)
class Cell:
    task: str
    spec: TaskParams
    data: dict[str, Split]  # train and the eval splits, capped
    pad_id: int

    def at_size(self, train_size: int | None) -> Cell:
        """The cell with the first `train_size` train rows (None: all)."""
        data = {**self.data, "train": self.data["train"].head(train_size)}
        return Cell(self.task, self.spec, data, self.pad_id)


def load_cell(params: Params, task: str, task_dir: Path, pretrained: Path) -> Cell:
    """Registry task `task`'s train and eval splits (in `task_dir`, as ingest writes them)
    through its input transformation with the tokenizer and context of the model in
    `pretrained`, the eval splits cut to `analysis.max_dev_examples`."""
    spec = params.tasks[task]
    tok = GPT1Tokenizer.load(pretrained / "tokenizer.json")
    n_ctx = load_config(pretrained / "config.json").n_ctx
    splits = load_splits(task_dir, spec, ["train", *spec.eval_splits], tok, n_ctx)
    data = {split: d if split == "train" else d.head(params.analysis.max_dev_examples)
            for split, d in splits.items()}
    log.info("%s: %s examples", spec.title,
             ", ".join(f"{s} {len(d.examples):,}" for s, d in data.items()))
    return Cell(task, spec, data, tok.pad_id)


def fine_tune_cell(params: Params, cell: Cell, trunk_for_seed: Callable[[int], Trunk],
                   lm_coef: float | None = None) -> dict[str, Any]:
    """Fine-tune `trunk_for_seed(seed)` on `cell` once per seed of `analysis.seeds` with
    `finetune.train` and the task's overrides (`lm_coef`, where given, for λ): the dev figures'
    median, min and max over seeds and each seed's (`gpt1.downstream.tuning.summary`), and each
    run's curves."""
    runs = []
    for seed in params.analysis.seeds:
        cfg = params.finetune.for_task(cell.spec, seed)
        if lm_coef is not None:
            cfg = cfg.model_copy(update={"lm_coef": lm_coef})
        runs.append(run_seed(cell.spec, cfg, trunk_for_seed(seed), cell.data, cell.pad_id))
    return {**summary(cell.spec, runs), **cell_facts(params, cell, lm_coef),
            "runs": [r.summary for r in runs]}


def cell_facts(params: Params, cell: Cell, lm_coef: float | None = None) -> dict[str, Any]:
    """What every fine-tuning of `cell` shares (`SHARED`): its train and eval sizes, λ (the
    task's, unless `lm_coef` is given), the metrics and the seeds."""
    if lm_coef is None:
        lm_coef = params.finetune.for_task(cell.spec, params.analysis.seeds[0]).lm_coef
    return {"train_examples": len(cell.data["train"].examples),
            "eval_examples": {s: len(cell.data[s].examples) for s in cell.spec.eval_splits},
            "lm_coef": lm_coef, "metrics": cell.spec.metrics, "seeds": params.analysis.seeds}


def size_key(size: int | None) -> str:
    """A train size's key in an ablation's metrics file: `train_1000`, or `train_all` for every
    row."""
    return f"train_{'all' if size is None else size}"


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


def ablation_ends(ablation: AblationParams, task: str, train_size: int | None,
                  n_layer: int) -> dict[int, Variant]:
    """The ends of Figure 2 (left) that Table 5's cells fine-tune already, with the same seeds,
    data and trunk: k = 0 is `no_pretrain` and k = n_layer is `full`, wherever
    `analysis.ablation` runs that variant on `task` at `train_size`. k -> the variant."""
    if train_size not in ablation.tasks.get(task, []):
        return {}
    ends: dict[int, Variant] = {0: "no_pretrain", n_layer: "full"}
    return {k: variant for k, variant in ends.items() if variant in ablation.variants}


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
