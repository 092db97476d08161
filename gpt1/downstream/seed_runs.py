"""A task of the registry fine-tuned once per seed: its splits through the task's input
transformation (`load_splits`), one run per seed scored on every dev split after each epoch
(`run_seed`), the median seed (`median_run`), the summary over seeds and the majority-class
baseline, and dev predictions as a file. Used by `gpt1.jobs.finetune` and the analyses' cells."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from gpt1.config import FinetuneTrainParams, TaskParams
from gpt1.corpus.text import TextCleaner
from gpt1.corpus.tokenizer import GPT1Tokenizer
from gpt1.downstream.families import family_of
from gpt1.downstream.metrics import score
from gpt1.downstream.task_model import task_model
from gpt1.downstream.transforms import encode_examples
from gpt1.model.heads import TaskModel
from gpt1.model.trunk import Trunk
from gpt1.training.device import placement
from gpt1.training.finetune_loop import finetune, majority_class, predict, summarise

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Split:
    examples: list[list[list[int]]]
    targets: np.ndarray | None  # None where the split is unlabelled (GLUE test sets)
    idx: np.ndarray
    lengths: np.ndarray  # each example's longest sequence uncut, in tokens (`Encoded`)


    def head(self, rows: int | None) -> Split:
        """The first `rows` examples (all for None): a capped split, as ingest caps them."""
        if rows is None:
            return self
        return Split(self.examples[:rows],
                     None if self.targets is None else self.targets[:rows], self.idx[:rows],
                     self.lengths[:rows])


@dataclass
class SeedRun:
    seed: int
    model: TaskModel
    epochs: list[dict[str, Any]]
    summary: dict[str, Any]
    compute: dict[str, Any]  # where it trained (`Placement.record`)

    def dev(self) -> dict[str, dict[str, float]]:
        return self.epochs[-1]["dev"]


def load_splits(task_dir: Path, task: TaskParams, splits: list[str], tok: GPT1Tokenizer,
                n_ctx: int) -> dict[str, Split]:
    """Each split's examples (`task_dir/<split>.parquet`, as ingest writes them) through the
    task's input transformation, and its targets; the examples cut to fit `n_ctx` logged."""
    cleaner = TextCleaner()
    loaded = {}
    for split in splits:
        table = pq.read_table(task_dir / f"{split}.parquet")
        labelled = table.column("label").null_count == 0
        encoded = encode_examples(task, table, tok, cleaner, n_ctx)
        loaded[split] = Split(encoded.examples,
                              family_of(task).targets(task, table) if labelled else None,
                              table.column("idx").to_numpy(), encoded.lengths)
    cut = truncation(loaded, n_ctx)
    log.info("%s: examples longer than n_ctx (%d tokens), cut to fit: %s", task.title, n_ctx,
             "; ".join(f"{split} {c['cut']:,} of {c['examples']:,}"
                       + (f" (median {c['median_tokens']:g} tokens)" if c["cut"] else "")
                       for split, c in cut["splits"].items()))
    return loaded


def truncation(data: dict[str, Split], n_ctx: int) -> dict[str, Any]:
    """Per split, how many examples were cut to fit `n_ctx` and their median length uncut (None
    where none was), as the metrics file holds it."""
    splits = {}
    for split, d in data.items():
        cut = d.lengths[d.lengths > n_ctx]
        splits[split] = {"examples": len(d.lengths), "cut": len(cut),
                         "median_tokens": float(np.median(cut)) if len(cut) else None}
    return {"n_ctx": n_ctx, "splits": splits}


def run_seed(task: TaskParams, cfg: FinetuneTrainParams, trunk: Trunk, data: dict[str, Split],
             pad_id: int) -> SeedRun:
    """Fine-tune `trunk` with a fresh head on `data["train"]` with `cfg` (its seed among them),
    scoring every eval split after each epoch."""
    seed = cfg.seed
    place = placement(cfg.device, cfg.precision)
    family = family_of(task)
    model = task_model(trunk, task, cfg)
    epochs: list[dict[str, Any]] = []

    def evaluate(epoch: int, m: TaskModel, train_loss: float) -> None:
        dev = {}
        for split in task.eval_splits:
            outputs = predict(m, data[split].examples, pad_id, cfg.batch_size, place.device,
                              place.dtype, cfg.pad_to_multiple)
            dev[split] = score(task.metrics, data[split].targets,
                               family.predictions(task, outputs))
        epochs.append({"epoch": epoch, "train_loss": train_loss, "dev": dev})
        log.info("%s seed %d epoch %d: train loss %.4f, %s", task.title, seed, epoch, train_loss,
                 "; ".join(f"{s} " + ", ".join(f"{k} {v:.2f}" for k, v in d.items())
                           for s, d in dev.items()))

    train = data["train"]
    result = finetune(model, train.examples, train.targets, pad_id, cfg, evaluate)
    summary = {"seed": seed, "steps": result.steps, "train_loss": round(result.train_loss, 4),
               "seconds": round(result.seconds, 1), "epochs": epochs}
    if result.compute["compiled"]:  # of `seconds`, apart: the steps that compiled a graph
        summary |= {"compile_seconds": round(result.compile_seconds, 1),
                    "batch_shapes": result.batch_shapes}
    return SeedRun(seed, model, epochs, summary, result.compute)


def majority_scores(task: TaskParams, data: dict[str, Split]) -> dict[str, dict[str, float]] | None:
    """Each eval split scored as if every example were the train split's most frequent label (or
    answer): the floor a fine-tuned model must clear. None for a regression task."""
    if task.regression:
        return None
    label = majority_class(data["train"].targets)
    return {split: score(task.metrics, data[split].targets,
                         np.full(len(data[split].targets), label))
            for split in task.eval_splits}


def summary(task: TaskParams, runs: list[SeedRun],
            majority: dict[str, dict[str, float]] | None = None) -> dict[str, Any]:
    """The runs' dev figures as the metrics file holds them
    (`gpt1.training.finetune_loop.summarise`)."""
    return summarise(task.metrics, task.eval_splits, {r.seed: r.dev() for r in runs}, majority)


def curve(task: TaskParams, runs: list[SeedRun]) -> list[tuple[int, float, float]]:
    """Per epoch: the headline dev figure (the first metric on the first eval split) and the
    training loss, each the median over the seeds' runs."""
    split, metric = task.eval_splits[0], task.metrics[0]
    return [(epoch["epoch"],
             float(np.median([r.epochs[i]["dev"][split][metric] for r in runs])),
             round(float(np.median([r.epochs[i]["train_loss"] for r in runs])), 4))
            for i, epoch in enumerate(runs[0].epochs)]


def median_run(task: TaskParams, runs: list[SeedRun]) -> SeedRun:
    """The run at the median of the first metric on the first dev split (the lower of the two
    middle runs for an even count)."""
    key = task.eval_splits[0], task.metrics[0]
    ordered = sorted(runs, key=lambda r: r.dev()[key[0]][key[1]])
    return ordered[(len(ordered) - 1) // 2]


def write_predictions(path: Path, task: TaskParams, idx: np.ndarray,
                      predictions: np.ndarray) -> None:
    """`index<TAB>prediction` (GLUE's submission format): label strings, scores, or the
    1-based number of the chosen answer."""
    if task.regression:
        shown = [f"{p:.3f}" for p in predictions]
    elif task.labels is None:
        shown = [str(int(p) + 1) for p in predictions]
    else:
        shown = [task.labels[int(p)] for p in predictions]
    lines = ["index\tprediction", *(f"{i}\t{p}" for i, p in zip(idx, shown, strict=True))]
    path.write_text("\n".join(lines) + "\n")
