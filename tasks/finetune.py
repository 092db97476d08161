"""Stage `finetune@<task>`: fine-tune the pretrained model on one task, score it on dev."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
from dvclive import Live

from gpt1.atomic import atomic_dir, write_text
from gpt1.bpe import Gpt1Tokenizer
from gpt1.config import Params
from gpt1.device import resolve_device, resolve_dtype
from gpt1.finetune import SequenceClassifier, finetune, predict_logits
from gpt1.metrics import score
from gpt1.model import load_model, save_safetensors
from gpt1.registry import TASKS, task_spec
from gpt1.text import TextCleaner
from gpt1.transforms import classification_input, encode_texts
from tasks.paths import FINETUNE_DIR, FINETUNE_LIVE, FINETUNE_METRICS, PRETRAIN_DIR, RAW_TASKS
from tasks.stage import main

log = logging.getLogger("gpt1.finetune")


def _encode(split_path: Path, tok: Gpt1Tokenizer, cleaner: TextCleaner,
            n_ctx: int) -> tuple[list[list[int]], np.ndarray, np.ndarray]:
    table = pq.read_table(split_path)
    texts = table.column("text").to_pylist()
    seqs = [classification_input(ids, tok, n_ctx) for ids in encode_texts(texts, tok, cleaner)]
    labels = table.column("label").to_numpy(zero_copy_only=False)
    return seqs, labels, table.column("idx").to_numpy()


def run(params: Params, task: str) -> None:
    if task not in params.finetune.tasks:
        raise ValueError(f"task {task!r} is not in finetune.tasks {params.finetune.tasks}")
    spec = task_spec(task)
    cfg = params.finetune.for_task(task)
    tok = Gpt1Tokenizer.load(PRETRAIN_DIR / "tokenizer.json")
    trunk = load_model(PRETRAIN_DIR)
    n_ctx = trunk.config.n_ctx
    cleaner = TextCleaner()
    data = {split: _encode(RAW_TASKS / task / f"{split}.parquet", tok, cleaner, n_ctx)
            for split in ("train", "dev", "test")}
    train_seqs, train_labels, _ = data["train"]
    dev_seqs, dev_labels, dev_idx = data["dev"]
    model = SequenceClassifier(trunk, len(spec.labels), cfg.clf_dropout)
    device = resolve_device(cfg.device)
    dtype = resolve_dtype(cfg.precision, device)
    log.info("%s: %d train / %d dev examples, %d epochs", spec.title, len(train_seqs),
             len(dev_seqs), cfg.epochs)

    def dev_scores(m: SequenceClassifier) -> tuple[dict[str, float], np.ndarray]:
        logits = predict_logits(m, dev_seqs, tok.pad_id, cfg.batch_size, device, dtype)
        preds = logits.argmax(axis=1)
        return score(spec.metric, dev_labels, preds), preds

    with Live(dir=str(FINETUNE_LIVE / task), save_dvc_exp=False, dvcyaml=None,
              report=None) as live:
        def on_epoch(epoch: int, m: SequenceClassifier) -> None:
            scores, _ = dev_scores(m)
            live.step = epoch
            for name, value in scores.items():
                live.log_metric(f"dev/{name}", value)
            log.info("%s epoch %d: dev %s", spec.title, epoch,
                     ", ".join(f"{k} {v:.2f}" for k, v in scores.items()))

        result = finetune(model, train_seqs, train_labels, tok.pad_id, cfg, on_epoch)

    scores, dev_preds = dev_scores(model)
    test_seqs, _, test_idx = data["test"]
    test_preds = predict_logits(model, test_seqs, tok.pad_id, cfg.batch_size, device,
                                dtype).argmax(axis=1)
    with atomic_dir(FINETUNE_DIR / task) as tmp:
        save_safetensors(model.state_dict(), tmp / "model.safetensors")
        trunk.config.save(tmp / "config.json")
        (tmp / "task.json").write_text(json.dumps(
            {"task": task, "family": spec.family, "labels": list(spec.labels)}, indent=2) + "\n")
        _write_predictions(tmp / "dev_predictions.tsv", dev_idx, dev_preds, spec.labels)
        _write_predictions(tmp / "test_predictions.tsv", test_idx, test_preds, spec.labels)
    metrics = {
        "task": task,
        "metric": spec.metric,
        "dev": {k: round(v, 2) for k, v in scores.items()},
        "train_examples": len(train_seqs),
        "dev_examples": len(dev_seqs),
        "steps": result.steps,
        "train_loss": round(result.train_loss, 4),
        "seconds": round(result.seconds, 1),
    }
    write_text(FINETUNE_METRICS / f"{task}.json", json.dumps(metrics, indent=2) + "\n")
    log.info("%s dev %s", spec.title, metrics["dev"])


def _write_predictions(path: Path, idx: np.ndarray, preds: np.ndarray,
                       labels: tuple[str, ...]) -> None:
    """GLUE submission format: `index<TAB>prediction`, predictions as the task's label strings."""
    lines = ["index\tprediction", *(f"{i}\t{labels[p]}" for i, p in zip(idx, preds, strict=True))]
    path.write_text("\n".join(lines) + "\n")


def _task_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--task", required=True, choices=sorted(TASKS))


if __name__ == "__main__":
    main("finetune", run, extra=_task_arg)
