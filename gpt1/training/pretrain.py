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
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from gpt1.config import PretrainParams
from gpt1.model.flops import measure_peak_flops, training_flops_per_token
from gpt1.model.transformer import GPT1
from gpt1.progress import StepProgress
from gpt1.training.checkpoint import (
    CheckpointStore,
    StopRequested,
    StopSignals,
    rng_state,
    set_rng_state,
)
from gpt1.training.device import autocast, configure_backends, resolve_dtype, to_device
from gpt1.training.distributed import SINGLE, Group
from gpt1.training.divergence import DivergenceGuard
from gpt1.training.optim import build_optimizer, build_scheduler, lr_factor

log = logging.getLogger(__name__)

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
             device: torch.device, dtype: torch.dtype, group: Group = SINGLE) -> float:
    """Mean LM loss over the same `batches` validation batches every time it is called; with
    several processes each scores its rows of every batch and all return the same mean."""
    was_training = model.training
    model.eval()
    rows = group.rows(batch_size)
    losses = []
    for i in range(batches):
        x, y = sampler.batch(i, batch_size)
        with autocast(device, dtype):
            losses.append(model.lm_loss(to_device(x[rows], device),
                                        to_device(y[rows], device)).item())
    model.train(was_training)
    return group.mean(float(np.mean(losses)))


class _LMLoss(nn.Module):
    """`model.lm_loss` as a module's forward: DDP synchronises the gradients of what runs through
    the forward of the module it wraps, and `torch.compile` then takes in the head and loss too."""

    def __init__(self, model: GPT1) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return self.model.lm_loss(input_ids, targets)


def pretrain(model: GPT1, train: list[np.ndarray], val: list[np.ndarray], cfg: PretrainParams,
             on_metrics: MetricsCallback | None = None,
             checkpoints: CheckpointStore | None = None,
             group: Group = SINGLE, extend: CheckpointStore | None = None) -> PretrainResult:
    """Train `model` in place for `cfg.max_steps` steps; `on_metrics(step, values)` sees the curves.

    With `checkpoints`, the run resumes from the newest checkpoint of the same settings, saves one
    every `cfg.checkpoint_every` steps and at the end, and on SIGTERM/SIGINT saves one after the
    current step and raises `StopRequested`. A resumed run ends bit-identical to an uninterrupted
    one on the CPU: the batches depend only on the step, and the RNG states are restored.

    With a `group` of several processes (torchrun, `gpt1.training.distributed.process_group`)
    training is
    data-parallel: `cfg.batch_size` is the global batch, each process computes its rows of the
    same batch, and DDP averages the gradients, so the run follows the one-process trajectory
    (to rounding; dropout draws differ). Only rank 0 calls `on_metrics`, shows progress and
    writes checkpoints; every process reads them to resume, and all stop at the same step.

    With `extend` (the checkpoints of a run whose settings differ only in a smaller
    `max_steps`) and none of its own, the run continues from that run's newest checkpoint
    instead of starting afresh: the steps done keep the learning rates they had, and from the
    resumed step on the rate follows this run's schedule (warmup, then decay to zero at this
    `cfg.max_steps`), so a run stopped at the end of a cosine decay warms back up to the value
    the longer schedule has at that step.
    """
    if cfg.batch_size % group.world_size:
        raise ValueError(f"pretrain.batch_size ({cfg.batch_size}) is the global batch: it must "
                         f"be divisible by the number of processes ({group.world_size})")
    device = group.device(cfg.device)
    dtype = resolve_dtype(cfg.precision, device)
    configure_backends(device)
    torch.manual_seed(cfg.seed + group.rank)  # each process draws its own dropout masks
    n_ctx = model.config.n_ctx
    tokens_per_step = cfg.batch_size * n_ctx  # over all processes
    rows = group.rows(cfg.batch_size)
    train_sampler = WindowSampler(train, n_ctx, cfg.seed, "train")
    val_sampler = WindowSampler(val, n_ctx, cfg.seed + 1, "val")
    model.to(device).train()
    optimizer = build_optimizer(model, cfg.lr, cfg.weight_decay, device)
    scheduler = build_scheduler(optimizer, cfg.warmup_steps, cfg.max_steps, cfg.schedule)
    report = (on_metrics if on_metrics is not None and group.is_main
              else lambda step, values: None)
    peak = (cfg.peak_tflops * 1e12 if cfg.peak_tflops is not None
            else measure_peak_flops(device, dtype)) * group.world_size
    flops_per_token = training_flops_per_token(model.config)
    log.info("pretraining %.2fM parameters on %d x %s (%s) for %d steps of %d x %d tokens; "
             "peak %.3g TFLOP/s (%s)", model.num_parameters() / 1e6, group.world_size, device,
             str(dtype).removeprefix("torch."), cfg.max_steps, cfg.batch_size, n_ctx, peak / 1e12,
             "configured" if cfg.peak_tflops is not None else "measured")

    history = MetricsHistory()
    start, seconds, smoothed, val_loss = 0, 0.0, math.nan, math.nan
    state = checkpoints.latest() if checkpoints is not None else None
    if state is None and extend is not None:
        state = extend.latest()
        if state is not None:
            log.warning("extending the run in %s from its step %d to max_steps %d (the "
                        "learning rate follows the schedule of %d steps from there)",
                        extend.directory, state["step"], cfg.max_steps, cfg.max_steps)
    if state is not None:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        # this run's schedule sets the rate of the next step (a no-op unless extending)
        for param_group, base_lr in zip(optimizer.param_groups, scheduler.base_lrs, strict=True):
            param_group["lr"] = base_lr * lr_factor(state["step"], cfg.warmup_steps,
                                                    cfg.max_steps, cfg.schedule)
        if len(state["rng"]) == group.world_size:
            set_rng_state(state["rng"][group.rank])
        else:
            log.warning("resuming on %d processes from a checkpoint of %d: the dropout draws "
                        "differ from an uninterrupted run's", group.world_size, len(state["rng"]))
        start, seconds = state["step"], state["seconds"]
        smoothed, val_loss = state["smoothed_loss"], state["val_loss"]
        history = MetricsHistory.from_state(state["history"])
        history.replay(report)
        log.info("resumed from the checkpoint of step %d", start)
    starts = group.gather(start)  # also a barrier: all have read before rank 0 may clear
    if len(set(starts)) > 1:
        raise RuntimeError(f"the processes found checkpoints of different steps {starts}: "
                           "they must all read one checkpoint folder")
    if state is None and checkpoints is not None and group.is_main:
        checkpoints.clear()

    def save_checkpoint(step: int) -> Path:
        assert checkpoints is not None
        rng = group.gather(rng_state())  # every process's dropout stream, for an exact resume
        path = checkpoints.save(step, {
            "model": model.state_dict(), "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(), "rng": rng,
            "seconds": seconds,
            "smoothed_loss": smoothed, "val_loss": val_loss, "history": history.to_state(),
        }) if group.is_main else None
        return group.from_main(path)  # nobody goes on (or exits) before it is on disk

    # DDP broadcasts rank 0's weights when it wraps them: built after the checkpoint is loaded
    step_loss: nn.Module = _LMLoss(model)
    if group.parallel:
        step_loss = DistributedDataParallel(
            step_loss, device_ids=[device.index] if device.type == "cuda" else None)
    if cfg.compile:
        step_loss = torch.compile(step_loss)

    seconds_before, started = seconds, time.perf_counter()
    guard = DivergenceGuard("pretrain")
    with (StopSignals() if checkpoints is not None else contextlib.nullcontext()) as stop, \
            (StepProgress("pretrain", cfg.max_steps, cfg.log_every, log, start=start)
             if group.is_main else contextlib.nullcontext()) as progress:
        for step in range(start, cfg.max_steps):
            x, y = train_sampler.batch(step, cfg.batch_size)
            x, y = to_device(x[rows], device), to_device(y[rows], device)
            with autocast(device, dtype):
                loss = step_loss(x, y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            optimizer.step()
            scheduler.step()

            loss_value = group.mean(loss.item())
            guard.check(step + 1, loss_value)
            smoothed = loss_value if math.isnan(smoothed) else 0.9 * smoothed + 0.1 * loss_value
            done = step + 1
            values = {"train/loss": loss_value, "lr": scheduler.get_last_lr()[0]}
            if done % cfg.eval_every == 0 or done == cfg.max_steps:
                val_loss = evaluate(model, val_sampler, cfg.eval_batches, cfg.batch_size, device,
                                    dtype, group)
                values["val/loss"] = val_loss
            report(done, values)
            history.record(done, values)
            seconds = seconds_before + time.perf_counter() - started
            if progress is not None:
                tok_s = (done - start) * tokens_per_step / (seconds - seconds_before)
                shown = {"loss": smoothed, "tok_s": tok_s,
                         "mfu%": 100 * tok_s * flops_per_token / peak}
                if not math.isnan(val_loss):
                    shown["val"] = val_loss
                progress.update(done, **shown)

            # a signal may reach some processes only: any one of them stops them all
            signum = int(group.max(stop.requested or 0)) if stop is not None else 0
            if checkpoints is not None and (done % cfg.checkpoint_every == 0 or signum
                                            or done == cfg.max_steps):
                path = save_checkpoint(done)
                if signum and done < cfg.max_steps:
                    raise StopRequested(signum, done, path)

    tokens = cfg.max_steps * tokens_per_step
    return PretrainResult(steps=cfg.max_steps, train_loss=smoothed, val_loss=val_loss,
                          tokens=tokens, seconds=seconds,
                          mfu=tokens / seconds * flops_per_token / peak, resumed_from=start)
