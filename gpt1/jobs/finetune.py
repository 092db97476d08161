"""Stage `finetune`'s job: a pretrained model fine-tuned on one task of the registry once per
seed (`gpt1.downstream.seed_runs`), the median seed's model and dev predictions written."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from gpt1.atomic import atomic_dir
from gpt1.config import Params
from gpt1.downstream.families import family_of
from gpt1.downstream.seed_runs import (
    curve,
    load_splits,
    majority_scores,
    median_run,
    run_seed,
    summary,
    truncation,
    write_predictions,
)
from gpt1.downstream.standalone import save_finetuned, task_card
from gpt1.model.registry import TOKENIZER, load_config, load_model, load_tokenizer
from gpt1.records import write_curve
from gpt1.training.device import placement
from gpt1.training.finetune_loop import predict

log = logging.getLogger(__name__)


def finetune_task(params: Params, task: str, splits: list[str], task_dir: Path,
                  pretrained: Path, out_dir: Path, curve_path: Path) -> dict[str, Any]:
    """Fine-tune the model in `pretrained` on registry task `task` (its `splits` in `task_dir`)
    once per seed of `finetune.seeds`; write the median seed's model and dev predictions to
    `out_dir` and the curve over epochs to `curve_path` (`write_curve`); return the metrics
    file's content."""
    spec = params.tasks[task]
    tok = load_tokenizer(pretrained)
    n_ctx = load_config(pretrained / "config.json").n_ctx
    data = load_splits(task_dir, spec, splits, tok, n_ctx)
    log.info("%s (%s): %s examples; seeds %s", spec.title, spec.family,
             ", ".join(f"{s} {len(d.examples):,}" for s, d in data.items()),
             params.finetune.seeds)
    runs = [run_seed(spec, params.finetune.for_task(spec, seed), load_model(pretrained), data,
                     tok.pad_id) for seed in params.finetune.seeds]
    kept = median_run(spec, runs)
    write_curve(curve_path, curve(spec, runs))
    cfg = params.finetune.for_task(spec, kept.seed)
    place = placement(cfg.device, cfg.precision)
    with atomic_dir(out_dir) as tmp:
        save_finetuned(tmp, kept.model, task_card(task, spec, n_ctx, kept.seed),
                       pretrained / TOKENIZER)
        for split, d in data.items():
            if split != "train":
                outputs = predict(kept.model, d.examples, tok.pad_id, cfg.batch_size,
                                  place.device, place.dtype, cfg.pad_to_multiple)
                write_predictions(tmp / f"{split}_predictions.tsv", spec, d.idx,
                                  family_of(spec).predictions(spec, outputs))
    metrics = {
        "task": task,
        "run": True,
        **summary(spec, runs, majority_scores(spec, data)),
        "train_examples": len(data["train"].examples),
        "eval_examples": {s: len(data[s].examples) for s in spec.eval_splits},
        "truncated": truncation(data, n_ctx),
        # what it trained with, the task's overrides applied: a sweep's experiments tell apart
        "knobs": cfg.model_dump(mode="json", exclude={"seed"}),
        "kept_seed": kept.seed,
        "compute": kept.compute,
        "metrics": spec.metrics,
        "seeds": params.finetune.seeds,
        "runs": [r.summary for r in runs],
    }
    log.info("%s %s (median over %d seeds): %s", spec.title, spec.eval_splits[0], len(runs),
             ", ".join(f"{m} {metrics[m]}" for m in spec.metrics))
    return metrics
