"""Supervised fine-tuning (paper §3.2): a linear head on the final `<classify>` state, trained on
L2 + λ·L1, the task loss plus the auxiliary language-modelling loss over the task text."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from gpt1.config import FinetuneTrainParams
from gpt1.device import autocast, configure_backends, resolve_device, resolve_dtype
from gpt1.model import GPT1
from gpt1.optim import build_optimizer, build_scheduler
from gpt1.progress import StepProgress

log = logging.getLogger("gpt1.finetune")


class SequenceClassifier(nn.Module):
    """The pretrained trunk, dropout, and a linear layer on the hidden state of the last token."""

    def __init__(self, trunk: GPT1, n_outputs: int, dropout: float) -> None:
        super().__init__()
        self.trunk = trunk
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(trunk.config.n_embd, n_outputs)
        nn.init.normal_(self.head.weight, std=trunk.config.initializer_range)
        nn.init.zeros_(self.head.bias)

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor,
                                                                          torch.Tensor]:
        """Logits (B, n_outputs) from each sequence's last real token, and the hidden states."""
        hidden = self.trunk(ids)
        last = hidden[torch.arange(ids.shape[0], device=ids.device), lengths - 1]
        return self.head(self.dropout(last)), hidden


def pad_batch(seqs: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad to the batch's longest sequence; causal attention never sees the padding."""
    lengths = torch.tensor([len(s) for s in seqs])
    ids = torch.full((len(seqs), int(lengths.max())), pad_id, dtype=torch.long)
    for row, seq in enumerate(seqs):
        ids[row, : len(seq)] = torch.tensor(seq)
    return ids, lengths


def lm_loss_on_text(model: SequenceClassifier, hidden: torch.Tensor, ids: torch.Tensor,
                    lengths: torch.Tensor) -> torch.Tensor:
    """Auxiliary LM loss: predict every real token after the first, padding ignored."""
    logits = model.trunk.lm_logits(hidden[:, :-1])
    targets = ids[:, 1:].masked_fill(
        torch.arange(1, ids.shape[1], device=ids.device)[None, :] >= lengths[:, None], -100
    )
    return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=-100)


def _batches(n: int, batch_size: int, rng: np.random.Generator | None) -> Iterator[np.ndarray]:
    order = rng.permutation(n) if rng is not None else np.arange(n)
    for start in range(0, n, batch_size):
        yield order[start:start + batch_size]


@dataclass(frozen=True)
class FinetuneResult:
    steps: int
    train_loss: float
    seconds: float


def finetune(model: SequenceClassifier, seqs: list[list[int]], labels: np.ndarray, pad_id: int,
             cfg: FinetuneTrainParams,
             on_epoch: Callable[[int, SequenceClassifier], None] | None = None
             ) -> FinetuneResult:
    """Train `model` in place on (`seqs`, `labels`) for `cfg.epochs` epochs."""
    device = resolve_device(cfg.device)
    dtype = resolve_dtype(cfg.precision, device)
    configure_backends(device)
    torch.manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    model.to(device).train()
    steps_per_epoch = math.ceil(len(seqs) / cfg.batch_size)
    total = steps_per_epoch * cfg.epochs
    optimizer = build_optimizer(model, cfg.lr, cfg.weight_decay, device)
    scheduler = build_scheduler(optimizer, math.ceil(cfg.warmup_fraction * total), total,
                                "linear")
    labels_t = torch.tensor(labels)
    started = time.perf_counter()
    smoothed = math.nan
    step = 0
    with StepProgress("finetune", total, max(1, steps_per_epoch // 5), log) as progress:
        for epoch in range(cfg.epochs):
            for idx in _batches(len(seqs), cfg.batch_size, rng):
                ids, lengths = pad_batch([seqs[i] for i in idx], pad_id)
                ids, lengths = ids.to(device), lengths.to(device)
                with autocast(device, dtype):
                    logits, hidden = model(ids, lengths)
                    loss = F.cross_entropy(logits.float(), labels_t[idx].to(device))
                    if cfg.lm_coef:
                        loss = loss + cfg.lm_coef * lm_loss_on_text(model, hidden, ids, lengths)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
                optimizer.step()
                scheduler.step()
                step += 1
                value = loss.item()
                smoothed = value if math.isnan(smoothed) else 0.95 * smoothed + 0.05 * value
                progress.update(step, loss=smoothed, epoch=epoch + 1)
            if on_epoch is not None:
                on_epoch(epoch + 1, model)
                model.train()
    return FinetuneResult(steps=total, train_loss=smoothed,
                          seconds=time.perf_counter() - started)


@torch.no_grad()
def predict_logits(model: SequenceClassifier, seqs: list[list[int]], pad_id: int,
                   batch_size: int, device: torch.device | str = "cpu",
                   dtype: torch.dtype = torch.float32) -> np.ndarray:
    """Head outputs (N, n_outputs) for every sequence, in order, in eval mode."""
    device = torch.device(device)
    model.to(device).eval()
    out = []
    for idx in _batches(len(seqs), batch_size, None):
        ids, lengths = pad_batch([seqs[i] for i in idx], pad_id)
        with autocast(device, dtype):
            logits, _ = model(ids.to(device), lengths.to(device))
        out.append(logits.float().cpu().numpy())
    return np.concatenate(out) if out else np.zeros((0, model.head.out_features), np.float32)
