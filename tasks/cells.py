"""What the analysis stages (`ablation`, `transfer`) share: a cell's data (a registry task at one
train size: its first N train rows, and `analysis.max_dev_examples` dev rows), and fine-tuning a
trunk on it once per seed of `analysis.seeds`."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpt1.config import Params, TaskParams
from gpt1.corpus.bpe import GPT1Tokenizer
from gpt1.downstream.tuning import Split, load_splits, run_seed, summary
from gpt1.model.registry import load_config
from gpt1.model.trunk import Trunk
from tasks.paths import PRETRAIN_DIR, RAW_TASKS

log = logging.getLogger("tasks.cells")


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


def load_cell(params: Params, task: str) -> Cell | str:
    """Registry task `task`'s train and eval splits through its input transformation, the eval
    splits cut to `analysis.max_dev_examples`; or why the task has no data (ingest's reason)."""
    status = json.loads((RAW_TASKS / task / "status.json").read_text())
    if not status["run"]:
        return f"task {task}: {status['reason']}"
    spec = params.tasks[task]
    tok = GPT1Tokenizer.load(PRETRAIN_DIR / "tokenizer.json")
    n_ctx = load_config(PRETRAIN_DIR / "config.json").n_ctx
    splits = load_splits(RAW_TASKS / task, spec, ["train", *spec.eval_splits], tok, n_ctx)
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
    return {**summary(cell.spec, runs), "train_examples": len(cell.data["train"].examples),
            "eval_examples": {s: len(cell.data[s].examples) for s in cell.spec.eval_splits},
            "lm_coef": cfg.lm_coef, "metrics": cell.spec.metrics, "seeds": params.analysis.seeds,
            "runs": [r.summary for r in runs]}
