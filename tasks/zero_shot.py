"""Stage `zero_shot@<task>` (paper §5, Figure 2 right): every pretraining snapshot, of the
Transformer and of the LSTM, answers a task of `analysis.zero_shot` by its heuristic alone,
without fine-tuning (`gpt1.downstream.zero_shot`), scored on the task's first metric as
fine-tuning scores it."""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from gpt1.atomic import write_text
from gpt1.config import Family, Heuristic, Params, TaskParams
from gpt1.corpus.bpe import GPT1Tokenizer
from gpt1.corpus.text import TextCleaner
from gpt1.downstream.families import family_of
from gpt1.downstream.metrics import score
from gpt1.downstream.transforms import encode_texts
from gpt1.downstream.zero_shot import (
    SENTIMENT_CUE,
    SENTIMENT_WORDS,
    Examples,
    ZeroShotTask,
    zero_shot_score,
)
from gpt1.errors import InputError
from gpt1.model.registry import load_model
from gpt1.records import not_run_reason
from gpt1.training.checkpoint import snapshot_folders
from gpt1.training.device import Placement, autocast, placement
from tasks.paths import (
    PRETRAIN_DIR,
    PRETRAIN_LSTM_DIR,
    PRETRAIN_SNAPSHOTS,
    RAW_TASKS,
    ZERO_SHOT_METRICS,
)
from tasks.stage import main

log = logging.getLogger("tasks.zero_shot")  # run as __main__: named by its module path

TRUNK_DIRS = {"gpt1": PRETRAIN_DIR, "lstm": PRETRAIN_LSTM_DIR}
# the family whose tables each heuristic reads: a sentence (`text`), or context, question, choices
FAMILY: dict[Heuristic, Family] = {"sentiment": "classification",
                                   "acceptability": "classification",
                                   "choice": "multiple_choice"}


def check_heuristic(name: str, task: TaskParams, heuristic: Heuristic) -> None:
    """ValueError where the heuristic cannot answer the task, or its metric has no chance level
    here."""
    key = f"analysis.zero_shot.tasks.{name}"
    if task.family != FAMILY[heuristic]:
        raise InputError(f"{key}: the {heuristic} heuristic answers {FAMILY[heuristic]} tasks; "
                         f"{name} is {task.family}")
    if heuristic != "choice" and len(task.labels or []) != 2:
        raise InputError(f"{key}: the {heuristic} heuristic answers two-label tasks; {name} has "
                         f"labels {task.labels}")
    if task.metrics[0] not in ("accuracy", "mcc"):
        raise InputError(f"{key}: {name} is scored by {task.metrics[0]}; the zero-shot stage "
                         "reports accuracy or mcc")


def chance(metric: str, options: int) -> float:
    """A guess's expected score: one in `options` right (accuracy), or no correlation (mcc)."""
    return 0.0 if metric == "mcc" else round(100.0 / options, 2)


def _encoded(table: pa.Table, column: str, tok: GPT1Tokenizer,
             cleaner: TextCleaner) -> list[list[int]]:
    return encode_texts(table.column(column).to_pylist(), tok, cleaner)


def read_examples(name: str, task: TaskParams, split: str, heuristic: Heuristic,
                  max_examples: int | None, tok: GPT1Tokenizer,
                  cleaner: TextCleaner) -> Examples:
    """The first `max_examples` rows of a split, cleaned and encoded as fine-tuning does, with
    no special tokens: the LM never saw them."""
    table = pq.read_table(RAW_TASKS / name / f"{split}.parquet")
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


def zero_shot_task(name: str, task: TaskParams, heuristic: Heuristic, max_examples: int | None,
                   tok: GPT1Tokenizer, cleaner: TextCleaner) -> ZeroShotTask:
    """The task as its heuristic answers it: its dev split, scored by its first metric."""
    metric_name = task.metrics[0]

    def metric(labels: np.ndarray, predictions: np.ndarray) -> float:
        return score([metric_name], labels, predictions)[metric_name]

    def read(split: str) -> Examples:
        return read_examples(name, task, split, heuristic, max_examples, tok, cleaner)

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


def trunk_snapshots(trunk: str, model_dir: Path) -> dict[int, Path]:
    """step -> folder of each snapshot the trunk's pretraining kept, in step order; none where
    it was not run."""
    stage = "pretrain" if trunk == "gpt1" else f"pretrain_{trunk}"
    if (reason := not_run_reason(model_dir, stage)) is not None:
        log.info("%s left out: not pretrained (%s)", trunk, reason)
        return {}
    folder = model_dir / PRETRAIN_SNAPSHOTS
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


def run(params: Params, task: str) -> None:
    started = time.perf_counter()
    cfg = params.analysis.zero_shot
    if task not in cfg.tasks:
        raise InputError(f"task {task!r} is not in analysis.zero_shot.tasks ({sorted(cfg.tasks)})")
    spec, heuristic = params.tasks[task], cfg.tasks[task]
    check_heuristic(task, spec, heuristic)
    out = ZERO_SHOT_METRICS / f"{task}.json"
    status = json.loads((RAW_TASKS / task / "status.json").read_text())
    if not status["run"]:
        write_text(out, json.dumps({"task": task, "run": False, "reason": status["reason"]},
                                   indent=2) + "\n")
        log.info("%s not run: %s", task, status["reason"])
        return
    tok = GPT1Tokenizer.load(PRETRAIN_DIR / "tokenizer.json")
    scored = zero_shot_task(task, spec, heuristic, cfg.max_examples, tok, TextCleaner())
    place = placement(params.pretrain.device, params.pretrain.precision)
    trunks = {trunk: score_snapshots(trunk, snapshots, task, scored, cfg.batch_size, place)
              for trunk, model_dir in TRUNK_DIRS.items()
              if (snapshots := trunk_snapshots(trunk, model_dir))}
    metrics = {"task": task, **task_entry(spec, scored), "trunks": trunks,
               "seconds": round(time.perf_counter() - started, 1)}
    write_text(out, json.dumps(metrics, indent=2) + "\n")


def _task_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--task", required=True, help="a task of analysis.zero_shot.tasks")


if __name__ == "__main__":
    main("zero_shot", run, extra=_task_arg)
