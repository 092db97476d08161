"""A task model made small for tests: a head on a tiny GPT-1 or LSTM over 13 ids (9 words and the
special tokens), and fine-tuning knobs for it (gpt1.training.finetune_loop,
gpt1.downstream.task_model)."""

from __future__ import annotations

import torch

from gpt1.config import Family, FinetuneTrainParams
from gpt1.downstream.families import FAMILIES
from gpt1.model.heads import TaskModel
from gpt1.model.lstm import LSTM, LSTMConfig
from gpt1.model.transformer import GPT1, GPT1Config
from gpt1.model.trunk import Trunk

V, CTX = 13, 32
START, DELIM, CLASSIFY, PAD = 9, 10, 11, 12  # words are 0..8


def toy_model(family: Family = "classification", outputs: int = 2, dropout: float = 0.0,
               seed: int = 0, trunk: str = "gpt1") -> TaskModel:
    """A head on a small GPT-1, or on the paper's recurrent control (`trunk="lstm"`)."""
    torch.manual_seed(seed)
    body: Trunk = (GPT1(GPT1Config(vocab_size=V, n_ctx=CTX, n_embd=32, n_layer=2, n_head=2,
                                   embd_pdrop=dropout, attn_pdrop=dropout, resid_pdrop=dropout))
                   if trunk == "gpt1" else
                   LSTM(LSTMConfig(vocab_size=V, n_ctx=CTX, n_embd=32, embd_pdrop=dropout,
                                   resid_pdrop=dropout)))
    return TaskModel(body, FAMILIES[family], outputs, dropout, seed)


def toy_cfg(**changes: object) -> FinetuneTrainParams:
    """Fine-tuning knobs for a toy model on the CPU, `changes` set."""
    base = dict(seed=0, device="cpu", precision="fp32", lr=1e-2, batch_size=16, epochs=3,
                warmup_fraction=0.1, weight_decay=0.01, grad_clip=1.0, lm_coef=0.5,
                clf_dropout=0.1)
    return FinetuneTrainParams(**{**base, **changes})
