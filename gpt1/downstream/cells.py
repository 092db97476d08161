"""A cell of the analyses (paper Table 5: `gpt1.jobs.ablation`; Figure 2 left:
`gpt1.jobs.transfer`): a registry task at one train size (its first N train rows, and
`analysis.max_dev_examples` rows of each eval split) fine-tuned once per seed of
`analysis.seeds` from the trunk each seed is given. The stage has checked beforehand that the
task has data (ingest's status file)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpt1.config import AblationParams, Params, TaskParams, Variant
from gpt1.downstream.seed_runs import Split, load_splits, run_seed, summary
from gpt1.model.registry import load_config, load_tokenizer
from gpt1.model.trunk import Trunk

log = logging.getLogger(__name__)


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
    tok = load_tokenizer(pretrained)
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
    median, min and max over seeds and each seed's (`gpt1.downstream.seed_runs.summary`), and each
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
    """What every fine-tuning of `cell` shares (`gpt1.jobs.transfer.SHARED`): its train and eval
    sizes, λ (the task's, unless `lm_coef` is given), the metrics and the seeds."""
    if lm_coef is None:
        lm_coef = params.finetune.for_task(cell.spec, params.analysis.seeds[0]).lm_coef
    return {"train_examples": len(cell.data["train"].examples),
            "eval_examples": {s: len(cell.data[s].examples) for s in cell.spec.eval_splits},
            "lm_coef": lm_coef, "metrics": cell.spec.metrics, "seeds": params.analysis.seeds}


def size_key(size: int | None) -> str:
    """A train size's key in an ablation's metrics file: `train_1000`, or `train_all` for every
    row."""
    return f"train_{'all' if size is None else size}"


def ablation_ends(ablation: AblationParams, task: str, train_size: int | None,
                  n_layer: int) -> dict[int, Variant]:
    """The ends of Figure 2 (left) that Table 5's cells fine-tune already, with the same seeds,
    data and trunk: k = 0 is `no_pretrain` and k = n_layer is `full`, wherever
    `analysis.ablation` runs that variant on `task` at `train_size`. k -> the variant."""
    if train_size not in ablation.tasks.get(task, []):
        return {}
    ends: dict[int, Variant] = {0: "no_pretrain", n_layer: "full"}
    return {k: variant for k, variant in ends.items() if variant in ablation.variants}
