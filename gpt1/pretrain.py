"""Unsupervised pretraining (paper §3.1): next-token prediction over windows of the corpus."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from gpt1.config import PretrainParams
from gpt1.device import autocast, configure_backends, resolve_device, resolve_dtype
from gpt1.model import GPT1
from gpt1.optim import build_optimizer, build_scheduler
from gpt1.progress import StepProgress

log = logging.getLogger("gpt1.pretrain")


class WindowSampler:
    """Random (input, target) windows of `n_ctx + 1` tokens from memory-mapped shards.

    Batch `i` depends only on (`seed`, `i`), so a run's data order is reproducible and can be
    resumed from a step number.
    """

    def __init__(self, shards: list[np.ndarray], n_ctx: int, seed: int, name: str) -> None:
        self.n_ctx, self.seed = n_ctx, seed
        self.shards = [s for s in shards if len(s) > n_ctx]
        starts = np.array([len(s) - n_ctx for s in self.shards], dtype=np.int64)
        if not len(starts):
            total = sum(len(s) for s in shards)
            raise ValueError(f"the {name} split has {total} tokens in its largest shard at most; "
                             f"a window needs n_ctx + 1 = {n_ctx + 1}")
        self._cum = np.cumsum(starts)

    def batch(self, index: int, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        rng = np.random.default_rng([self.seed, index])
        picks = rng.integers(0, self._cum[-1], size=batch_size)
        shard_ids = np.searchsorted(self._cum, picks, side="right")
        offsets = picks - np.concatenate([[0], self._cum[:-1]])[shard_ids]
        windows = np.stack([
            self.shards[s][o:o + self.n_ctx + 1].astype(np.int64)
            for s, o in zip(shard_ids, offsets, strict=True)
        ])
        tokens = torch.from_numpy(windows)
        return tokens[:, :-1], tokens[:, 1:]


@dataclass(frozen=True)
class PretrainResult:
    steps: int
    train_loss: float
    val_loss: float
    tokens: int
    seconds: float

    @property
    def val_perplexity(self) -> float:
        return math.exp(self.val_loss)


@torch.no_grad()
def evaluate(model: GPT1, sampler: WindowSampler, batches: int, batch_size: int,
             device: torch.device, dtype: torch.dtype) -> float:
    """Mean LM loss over the same `batches` validation batches every time it is called."""
    was_training = model.training
    model.eval()
    losses = []
    for i in range(batches):
        x, y = sampler.batch(i, batch_size)
        with autocast(device, dtype):
            losses.append(model.lm_loss(x.to(device), y.to(device)).item())
    model.train(was_training)
    return float(np.mean(losses))


MetricsCallback = Callable[[int, dict[str, float]], None]


def pretrain(model: GPT1, train: list[np.ndarray], val: list[np.ndarray], cfg: PretrainParams,
             on_metrics: MetricsCallback | None = None) -> PretrainResult:
    """Train `model` in place for `cfg.max_steps` steps; `on_metrics(step, values)` sees the curves.
    """
    device = resolve_device(cfg.device)
    dtype = resolve_dtype(cfg.precision, device)
    configure_backends(device)
    torch.manual_seed(cfg.seed)
    n_ctx = model.config.n_ctx
    train_sampler = WindowSampler(train, n_ctx, cfg.seed, "train")
    val_sampler = WindowSampler(val, n_ctx, cfg.seed + 1, "val")
    model.to(device).train()
    optimizer = build_optimizer(model, cfg.lr, cfg.weight_decay, device)
    scheduler = build_scheduler(optimizer, cfg.warmup_steps, cfg.max_steps, cfg.schedule)
    report = on_metrics or (lambda step, values: None)
    log.info("pretraining %.2fM parameters on %s (%s) for %d steps of %d x %d tokens",
             model.num_parameters() / 1e6, device, str(dtype).removeprefix("torch."),
             cfg.max_steps, cfg.batch_size, n_ctx)

    started = time.perf_counter()
    val_loss = math.nan
    smoothed = math.nan
    with StepProgress("pretrain", cfg.max_steps, cfg.log_every, log) as progress:
        for step in range(cfg.max_steps):
            x, y = train_sampler.batch(step, cfg.batch_size)
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            with autocast(device, dtype):
                loss = model.lm_loss(x, y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            optimizer.step()
            scheduler.step()

            loss_value = loss.item()
            if not math.isfinite(loss_value):
                raise FloatingPointError(f"pretrain: loss became {loss_value} at step {step + 1}")
            smoothed = loss_value if math.isnan(smoothed) else 0.9 * smoothed + 0.1 * loss_value
            done = step + 1
            elapsed = time.perf_counter() - started
            values = {"train/loss": loss_value, "lr": scheduler.get_last_lr()[0]}
            if done % cfg.eval_every == 0 or done == cfg.max_steps:
                val_loss = evaluate(model, val_sampler, cfg.eval_batches, cfg.batch_size, device,
                                    dtype)
                values["val/loss"] = val_loss
            report(done, values)
            shown = {"loss": smoothed, "tok_s": done * cfg.batch_size * n_ctx / elapsed}
            if not math.isnan(val_loss):
                shown["val"] = val_loss
            progress.update(done, **shown)

    seconds = time.perf_counter() - started
    return PretrainResult(steps=cfg.max_steps, train_loss=smoothed, val_loss=val_loss,
                          tokens=cfg.max_steps * cfg.batch_size * n_ctx, seconds=seconds)
