"""The zero-shot curves of the paper's Figure 2 (right): a task of `analysis.zero_shot` answered
by its heuristic alone (`gpt1.downstream.zero_shot_heuristics`), without fine-tuning, at every
pretraining snapshot of the Transformer and of the LSTM, scored on the task's first metric as
fine-tuning scores it. Which heuristic may answer which task is checked when the params load
(`gpt1.config.Params`)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from gpt1.config import Heuristic, Params, TaskParams
from gpt1.corpus.text import TextCleaner
from gpt1.corpus.tokenizer import GPT1Tokenizer
from gpt1.downstream.families import family_of
from gpt1.downstream.metrics import score
from gpt1.downstream.transforms import encode_texts
from gpt1.downstream.zero_shot_heuristics import (
    SENTIMENT_CUE,
    SENTIMENT_WORDS,
    Examples,
    ZeroShotTask,
    zero_shot_score,
)
from gpt1.model.registry import load_model
from gpt1.records import not_run_reason
from gpt1.training.checkpoint import snapshot_folders
from gpt1.training.device import Placement, autocast, placement

log = logging.getLogger(__name__)


def chance(metric: str, options: int) -> float:
    """A guess's expected score: one in `options` right (accuracy), or no correlation (mcc)."""
    return 0.0 if metric == "mcc" else round(100.0 / options, 2)


def _encoded(table: pa.Table, column: str, tok: GPT1Tokenizer,
             cleaner: TextCleaner) -> list[list[int]]:
    return encode_texts(table.column(column).to_pylist(), tok, cleaner)


def read_examples(task_dir: Path, task: TaskParams, split: str, heuristic: Heuristic,
                  max_examples: int | None, tok: GPT1Tokenizer,
                  cleaner: TextCleaner) -> Examples:
    """The first `max_examples` rows of a split (`<task_dir>/<split>.parquet`, as ingest writes
    it), cleaned and encoded as fine-tuning does, with no special tokens: the LM never saw
    them."""
    table = pq.read_table(task_dir / f"{split}.parquet")
    if max_examples is not None:
        table = table.slice(0, max_examples)
    labels = family_of(task).targets(task, table)
    if heuristic != "choice":
        return Examples(_encoded(table, "text", tok, cleaner), labels)
    contexts, questions = (_encoded(table, c, tok, cleaner) for c in ("context", "question"))
    rows = table.column("choices").to_pylist()
    flat = iter(encode_texts([choice for row in rows for choice in row], tok, cleaner))
    return Examples([c + q for c, q in zip(contexts, questions, strict=True)], labels,
                    [[next(flat) for _ in row] for row in rows])


def zero_shot_task(task_dir: Path, task: TaskParams, heuristic: Heuristic,
                   max_examples: int | None, tok: GPT1Tokenizer,
                   cleaner: TextCleaner) -> ZeroShotTask:
    """The task as its heuristic answers it: its dev split, scored by its first metric."""
    metric_name = task.metrics[0]

    def metric(labels: np.ndarray, predictions: np.ndarray) -> float:
        return score([metric_name], labels, predictions)[metric_name]

    def read(split: str) -> Examples:
        return read_examples(task_dir, task, split, heuristic, max_examples, tok, cleaner)

    dev = read(task.eval_splits[0])
    if heuristic == "sentiment":
        cue, *words = encode_texts([SENTIMENT_CUE, *SENTIMENT_WORDS], tok, cleaner)
        return ZeroShotTask(heuristic, dev, metric, cue=cue, words=words)
    if heuristic == "acceptability":
        return ZeroShotTask(heuristic, dev, metric, train=read("train"))
    return ZeroShotTask(heuristic, dev, metric)


def task_entry(task: TaskParams, zero_shot: ZeroShotTask) -> dict[str, Any]:
    """What the metrics file says of a task scored."""
    metric = task.metrics[0]
    dev, train = zero_shot.dev, zero_shot.train
    options = len(dev.choices[0]) if dev.choices is not None else len(task.labels or ())
    entry = {"run": True, "heuristic": zero_shot.heuristic, "metric": metric,
             "split": task.eval_splits[0], "chance": chance(metric, options),
             "examples": len(dev.texts)}
    return entry if train is None else {**entry, "train_examples": len(train.texts)}


def trunk_snapshots(trunk: str, model_dir: Path, snapshots: str) -> dict[int, Path]:
    """step -> folder of each snapshot the trunk's pretraining kept (in `model_dir/snapshots`),
    in step order; none where it was not run (stage `pretrain`, or `pretrain_control@<trunk>`)."""
    stage = "pretrain" if trunk == "gpt1" else f"pretrain_control@{trunk}"
    if (reason := not_run_reason(model_dir, stage)) is not None:
        log.info("%s left out: not pretrained (%s)", trunk, reason)
        return {}
    folder = model_dir / snapshots
    found = snapshot_folders(folder)
    if not found:
        log.info("%s left out: no snapshots in %s", trunk, folder)
    return found


def score_snapshots(trunk: str, snapshots: dict[int, Path], name: str, task: ZeroShotTask,
                    batch_size: int, place: Placement) -> dict[str, Any]:
    """The task's score at each snapshot, in step order."""
    scores = []
    for step, folder in snapshots.items():
        model = load_model(folder).to(place.device)
        with autocast(place.device, place.dtype):
            scores.append(round(zero_shot_score(model, task, batch_size), 2))
        log.info("%s step %d: %s %.2f", trunk, step, name, scores[-1])
    return {"steps": list(snapshots), "scores": scores}


def zero_shot_curves(params: Params, name: str, task_dir: Path, tokenizer: Path,
                     trunks: dict[str, Path], snapshots: str) -> dict[str, Any]:
    """Task `name` of `analysis.zero_shot.tasks` (its tables in `task_dir`, encoded by the
    `tokenizer` file) answered by its heuristic at every snapshot (`<model folder>/<snapshots>`)
    of each pretrained trunk of `trunks` (name -> model folder; one not pretrained, or without
    snapshots, left out): what the metrics file says of it, but for the time taken."""
    cfg = params.analysis.zero_shot
    spec, heuristic = params.tasks[name], cfg.tasks[name]
    tok = GPT1Tokenizer.load(tokenizer)
    scored = zero_shot_task(task_dir, spec, heuristic, cfg.max_examples, tok, TextCleaner())
    place = placement(params.pretrain.device, params.pretrain.precision)
    curves = {trunk: score_snapshots(trunk, found, name, scored, cfg.batch_size, place)
              for trunk, model_dir in trunks.items()
              if (found := trunk_snapshots(trunk, model_dir, snapshots))}
    return {"task": name, **task_entry(spec, scored), "trunks": curves}
