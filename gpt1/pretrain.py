"""Unsupervised pretraining (paper §3.1): next-token prediction over windows of the corpus."""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from gpt1.checkpoint import CheckpointStore, StopRequested, StopSignals, rng_state, set_rng_state
from gpt1.config import PretrainParams
from gpt1.device import autocast, configure_backends, resolve_device, resolve_dtype
from gpt1.flops import measure_peak_flops, training_flops_per_token
from gpt1.model import GPT1
from gpt1.optim import build_optimizer, build_scheduler
from gpt1.progress import StepProgress

log = logging.getLogger("gpt1.pretrain")

MetricsCallback = Callable[[int, dict[str, float]], None]


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
    seconds: float  # training time over every session of the run, resumed ones included
    mfu: float  # model FLOPs utilisation against the device's peak
    resumed_from: int  # the step this session started from (0: a fresh run)

    @property
    def val_perplexity(self) -> float:
        return math.exp(self.val_loss)

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds


class MetricsHistory:
    """Every metric value a run reported, by step, kept in its checkpoints so that a resumed
    run can replay the curves up to where it stopped."""

    def __init__(self, series: dict[str, list[tuple[int, float]]] | None = None) -> None:
        self.series = series or {}

    def record(self, step: int, values: dict[str, float]) -> None:
        for name, value in values.items():
            self.series.setdefault(name, []).append((step, value))

    def to_state(self) -> dict[str, torch.Tensor]:
        return {name: torch.tensor(points, dtype=torch.float64)
                for name, points in self.series.items()}

    @classmethod
    def from_state(cls, state: dict[str, torch.Tensor]) -> MetricsHistory:
        return cls({name: [(int(s), float(v)) for s, v in points.tolist()]
                    for name, points in state.items()})

    def replay(self, report: MetricsCallback) -> None:
        by_step: dict[int, dict[str, float]] = {}
        for name, points in self.series.items():
            for step, value in points:
                by_step.setdefault(step, {})[name] = value
        for step in sorted(by_step):
            report(step, by_step[step])


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


def pretrain(model: GPT1, train: list[np.ndarray], val: list[np.ndarray], cfg: PretrainParams,
             on_metrics: MetricsCallback | None = None,
             checkpoints: CheckpointStore | None = None) -> PretrainResult:
    """Train `model` in place for `cfg.max_steps` steps; `on_metrics(step, values)` sees the curves.

    With `checkpoints`, the run resumes from the newest checkpoint of the same settings, saves one
    every `cfg.checkpoint_every` steps and at the end, and on SIGTERM/SIGINT saves one after the
    current step and raises `StopRequested`. A resumed run ends bit-identical to an uninterrupted
    one on the CPU: the batches depend only on the step, and the RNG states are restored.
    """
    device = resolve_device(cfg.device)
    dtype = resolve_dtype(cfg.precision, device)
    configure_backends(device)
    torch.manual_seed(cfg.seed)
    n_ctx = model.config.n_ctx
    tokens_per_step = cfg.batch_size * n_ctx
    train_sampler = WindowSampler(train, n_ctx, cfg.seed, "train")
    val_sampler = WindowSampler(val, n_ctx, cfg.seed + 1, "val")
    model.to(device).train()
    optimizer = build_optimizer(model, cfg.lr, cfg.weight_decay, device)
    scheduler = build_scheduler(optimizer, cfg.warmup_steps, cfg.max_steps, cfg.schedule)
    report = on_metrics or (lambda step, values: None)
    peak = (cfg.peak_tflops * 1e12 if cfg.peak_tflops is not None
            else measure_peak_flops(device, dtype))
    flops_per_token = training_flops_per_token(model.config)
    log.info("pretraining %.2fM parameters on %s (%s) for %d steps of %d x %d tokens; "
             "peak %.3g TFLOP/s (%s)", model.num_parameters() / 1e6, device,
             str(dtype).removeprefix("torch."), cfg.max_steps, cfg.batch_size, n_ctx, peak / 1e12,
             "configured" if cfg.peak_tflops is not None else "measured")

    history = MetricsHistory()
    start, seconds, smoothed, val_loss = 0, 0.0, math.nan, math.nan
    state = checkpoints.latest() if checkpoints is not None else None
    if state is not None:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        set_rng_state(state["rng"])
        start, seconds = state["step"], state["seconds"]
        smoothed, val_loss = state["smoothed_loss"], state["val_loss"]
        history = MetricsHistory.from_state(state["history"])
        history.replay(report)
        log.info("resumed from the checkpoint of step %d in %s", start, checkpoints.directory)
    elif checkpoints is not None:
        checkpoints.clear()

    def save_checkpoint(step: int) -> Path:
        assert checkpoints is not None
        return checkpoints.save(step, {
            "model": model.state_dict(), "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(), "rng": rng_state(),
            "seconds": seconds,
            "smoothed_loss": smoothed, "val_loss": val_loss, "history": history.to_state(),
        })

    seconds_before, started = seconds, time.perf_counter()
    with (StopSignals() if checkpoints is not None else contextlib.nullcontext()) as stop, \
            StepProgress("pretrain", cfg.max_steps, cfg.log_every, log, start=start) as progress:
        for step in range(start, cfg.max_steps):
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
            values = {"train/loss": loss_value, "lr": scheduler.get_last_lr()[0]}
            if done % cfg.eval_every == 0 or done == cfg.max_steps:
                val_loss = evaluate(model, val_sampler, cfg.eval_batches, cfg.batch_size, device,
                                    dtype)
                values["val/loss"] = val_loss
            report(done, values)
            history.record(done, values)
            seconds = seconds_before + time.perf_counter() - started
            tok_s = (done - start) * tokens_per_step / (seconds - seconds_before)
            shown = {"loss": smoothed, "tok_s": tok_s,
                     "mfu%": 100 * tok_s * flops_per_token / peak}
            if not math.isnan(val_loss):
                shown["val"] = val_loss
            progress.update(done, **shown)

            stopping = stop is not None and stop.requested is not None
            if checkpoints is not None and (done % cfg.checkpoint_every == 0 or stopping
                                            or done == cfg.max_steps):
                path = save_checkpoint(done)
                if stopping and done < cfg.max_steps:
                    raise StopRequested(stop.requested, done, path)

    tokens = cfg.max_steps * tokens_per_step
    return PretrainResult(steps=cfg.max_steps, train_loss=smoothed, val_loss=val_loss,
                          tokens=tokens, seconds=seconds,
                          mfu=tokens / seconds * flops_per_token / peak, resumed_from=start)
