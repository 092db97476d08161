"""Pretraining made small for tests: a tiny GPT-1 and pretrain knobs that take a few steps on the
CPU, set in the repository's params.yaml (gpt1.jobs.pretrain, tasks.pretrain)."""

from __future__ import annotations

from gpt1.config import LSTMParams, ModelParams, Params, PretrainParams, load_params
from tests.conftest import REPO

MODEL = ModelParams(n_ctx=16, n_embd=32, n_layer=2, n_head=2, dropout=0.1)
PRETRAIN = PretrainParams(device="cpu", precision="fp32", lr=0.003, batch_size=8,
                          weight_decay=0.01, grad_clip=1.0, seed=1234, max_steps=4,
                          warmup_steps=2, schedule="cosine", eval_every=2, eval_batches=2,
                          log_every=2, checkpoint_every=2, keep_checkpoints=2, peak_tflops=1.0,
                          snapshots=[0, 2, 4, 9])


def tiny_params(lstm_units: int | None = None, lstm_lr: float | None = 0.002,
                **pretrain: object) -> Params:
    """params.yaml with the tiny model and pretrain knobs above, and `analysis.lstm` set."""
    base = load_params(REPO / "params.yaml")
    return base.model_copy(update={
        "model": MODEL, "pretrain": PRETRAIN.model_copy(update=pretrain),
        "analysis": base.analysis.model_copy(update={
            "lstm": LSTMParams(n_embd=lstm_units, lr=lstm_lr)})})
