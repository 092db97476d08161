"""Stage `pretrain`: GPT-1 language-model pretraining on the token shards."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import shutil

import torch
from dvclive import Live

from gpt1.atomic import atomic_dir, write_text
from gpt1.bpe import Gpt1Tokenizer
from gpt1.checkpoint import CheckpointStore, StopRequested
from gpt1.config import Params
from gpt1.distributed import process_group
from gpt1.model import GPT1, GPT1Config, save_model
from gpt1.pretrain import pretrain
from gpt1.shards import read_split, unigram_loss
from tasks.paths import (
    BPE_DIR,
    PRETRAIN_CHECKPOINTS,
    PRETRAIN_DIR,
    PRETRAIN_LIVE,
    PRETRAIN_METRICS,
    SHARDS_DIR,
)
from tasks.stage import main

log = logging.getLogger("gpt1.pretrain")

UNIGRAM_MARGIN = 0.1  # nats: closer than this to the unigram loss, context is barely used
# Knobs that change neither the data nor the arithmetic of training: a checkpoint written under
# other values of these is still resumed from.
NOT_IN_FINGERPRINT = {"log_every", "checkpoint_every", "keep_checkpoints", "peak_tflops"}


def model_config(params: Params, vocab_size: int) -> GPT1Config:
    m = params.model
    return GPT1Config(vocab_size=vocab_size, n_ctx=m.n_ctx, n_embd=m.n_embd, n_layer=m.n_layer,
                      n_head=m.n_head, embd_pdrop=m.dropout, attn_pdrop=m.dropout,
                      resid_pdrop=m.dropout)


def run_fingerprint(params: Params, manifest_text: str) -> str:
    """A digest of everything a pretraining trajectory depends on: model and training knobs and
    the exact token shards (their manifest holds each shard's sha256)."""
    knobs = {"model": params.model.model_dump(),
             "pretrain": params.pretrain.model_dump(exclude=NOT_IN_FINGERPRINT),
             "shards": hashlib.sha256(manifest_text.encode()).hexdigest()}
    return hashlib.sha256(json.dumps(knobs, sort_keys=True).encode()).hexdigest()


def run(params: Params) -> None:
    tokenizer_path = BPE_DIR / "tokenizer.json"
    tokenizer = Gpt1Tokenizer.load(tokenizer_path)
    manifest_text = (SHARDS_DIR / "manifest.json").read_text()
    manifest = json.loads(manifest_text)
    if manifest["vocab_size"] != tokenizer.vocab_size:
        raise ValueError(f"{SHARDS_DIR}/manifest.json: vocab_size {manifest['vocab_size']} does "
                         f"not match {tokenizer_path} ({tokenizer.vocab_size}); re-run tokenize")
    torch.manual_seed(params.pretrain.seed)
    model = GPT1(model_config(params, tokenizer.vocab_size))
    train, val = read_split(SHARDS_DIR / "train"), read_split(SHARDS_DIR / "val")
    checkpoints = CheckpointStore(PRETRAIN_CHECKPOINTS, run_fingerprint(params, manifest_text),
                                  keep=params.pretrain.keep_checkpoints)
    # under torchrun every process trains its share of each batch; rank 0 alone writes
    with process_group(params.pretrain.device) as group, \
            (Live(dir=str(PRETRAIN_LIVE), save_dvc_exp=False, dvcyaml=None, report=None)
             if group.is_main else contextlib.nullcontext()) as live:
        def on_metrics(step: int, values: dict[str, float]) -> None:
            live.step = step
            for name, value in values.items():
                live.log_metric(name, value, plot=True)

        try:
            result = pretrain(model, train, val, params.pretrain, on_metrics, checkpoints, group)
        except StopRequested as stop:
            if group.is_main:
                log.warning("pretraining stopped: %s; run the stage again to resume from it",
                            stop)
            raise SystemExit(128 + stop.signum) from None
    if not group.is_main:
        return
    unigram = unigram_loss(train, val, tokenizer.vocab_size)
    with atomic_dir(PRETRAIN_DIR) as tmp:
        save_model(model.cpu(), tmp)
        shutil.copy(tokenizer_path, tmp / "tokenizer.json")
    metrics = {
        "steps": result.steps,
        "tokens": result.tokens,
        "train_loss": round(result.train_loss, 4),
        "val_loss": round(result.val_loss, 4),
        "val_perplexity": round(result.val_perplexity, 2),
        "unigram_val_loss": round(unigram, 4),
        "parameters": model.num_parameters(),
        "seconds": round(result.seconds, 1),
        "tokens_per_second": round(result.tokens_per_second, 1),
        "mfu": round(result.mfu, 4),
    }
    write_text(PRETRAIN_METRICS, json.dumps(metrics, indent=2) + "\n")
    log.info("val loss %.4f (perplexity %.1f) after %d steps; token frequencies alone: %.4f",
             result.val_loss, result.val_perplexity, result.steps, unigram)
    if result.val_loss > unigram - UNIGRAM_MARGIN:
        log.warning("the model has learned little beyond token frequencies (val loss %.4f, "
                    "unigram %.4f): pretrain for more steps (pretrain.max_steps)",
                    result.val_loss, unigram)


if __name__ == "__main__":
    main("pretrain", run)
