"""Unsupervised pretraining (paper §3.1): next-token prediction over windows of the corpus."""

from __future__ import annotations

import contextlib
import copy
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.profiler import record_function

from gpt1.config import PretrainParams
from gpt1.errors import InputError
from gpt1.model.flops import measure_peak_flops
from gpt1.model.trunk import Trunk
from gpt1.progress import StepProgress
from gpt1.training.checkpoint import (
    CheckpointStore,
    StopRequested,
    StopSignals,
    rng_state,
    set_rng_state,
)
from gpt1.training.device import (
    Placement,
    autocast,
    placement,
    resolve_compile,
    to_device,
)
from gpt1.training.distributed import SINGLE, Group
from gpt1.training.optim import build_optimizer, build_scheduler, lr_factor
from gpt1.training.step import StepLoss, TrainingState, TrainStep, loss_read_interval

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
            raise InputError(f"the {name} split has {total} tokens in its largest shard at most; "
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
    startup_seconds: float  # of `seconds`, the sessions' first steps (`steady_rate`)
    startup_steps: int  # one per session
    mfu: float  # model FLOPs utilisation against `peak_flops`, at the steady rate
    peak_flops: float  # the devices' peak (FLOP/s), measured or pretrain.peak_tflops
    resumed_from: int  # the step this session started from (0: a fresh run)
    compute: dict[str, Any]  # where this session computed (`Placement.record`)

    @property
    def val_perplexity(self) -> float:
        return math.exp(self.val_loss)

    @property
    def tokens_per_second(self) -> float:
        """The steady rate (`steady_rate`)."""
        return self.tokens / self.steps * steady_rate(self.steps, self.seconds,
                                                      self.startup_steps, self.startup_seconds)


def steady_rate(steps: int, seconds: float, startup_steps: int, startup_seconds: float) -> float:
    """Steps per second once started: over the steps after the startup ones (each session's
    first, where `torch.compile` compiles the step and memory is first allocated), the rate a
    longer run keeps; over every step where no other was timed."""
    if steps > startup_steps and seconds > startup_seconds:
        return (steps - startup_steps) / (seconds - startup_seconds)
    return steps / seconds


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
def evaluate(model: Trunk, sampler: WindowSampler, batches: int, batch_size: int,
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
            losses.append(model.lm_loss(to_device(x[rows], device), to_device(y[rows], device)))
    model.train(was_training)
    return group.mean(float(np.mean(torch.stack(losses).tolist())))  # the host waits once


class _LMLoss(nn.Module):
    """`model.lm_loss` as a module's forward: DDP synchronises the gradients of what runs through
    the forward of the module it wraps, and `torch.compile` then takes in the head and loss too."""

    def __init__(self, model: Trunk) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return self.model.lm_loss(input_ids, targets)


@dataclass
class PretrainState(TrainingState):
    """A pretraining run between two steps: all that its checkpoints hold (`save_checkpoint`)
    and that resuming it restores (`restore`)."""

    model: Trunk
    step: int = 0  # steps done
    seconds: float = 0.0  # training time over every session of the run
    startup_seconds: float = 0.0  # of `seconds`, each session's first step (`steady_rate`)
    startup_steps: int = 0  # one per session
    val_loss: float = math.nan  # the latest evaluation's (NaN before the first)
    history: MetricsHistory = field(default_factory=MetricsHistory)


def new_state(model: Trunk, cfg: PretrainParams, device: torch.device) -> PretrainState:
    """Step 0 of a run: `model` on `device` in training mode, a fresh optimiser and schedule."""
    model.to(device).train()
    optimizer = build_optimizer(model, cfg.lr, cfg.weight_decay, device)
    scheduler = build_scheduler(optimizer, cfg.warmup_steps, cfg.max_steps, cfg.schedule)
    return PretrainState(model, optimizer, scheduler)


def save_checkpoint(state: PretrainState, checkpoints: CheckpointStore,
                    group: Group = SINGLE) -> Path:
    """Rank 0 writes `state` as the checkpoint of its step, with every process's RNG state; all
    return its path once it is on disk."""
    rng = group.gather(rng_state())  # every process's dropout stream, for an exact resume
    path = checkpoints.save(state.step, {
        "model": state.model.state_dict(), "optimizer": state.optimizer.state_dict(),
        "scheduler": state.scheduler.state_dict(), "rng": rng,
        "seconds": state.seconds, "startup_seconds": state.startup_seconds,
        "startup_steps": state.startup_steps,
        "smoothed_loss": state.smoothed_loss, "val_loss": state.val_loss,
        "history": state.history.to_state(),
    }) if group.is_main else None
    return group.from_main(path)  # nobody goes on (or exits) before it is on disk


def restore(state: PretrainState, checkpoint: dict[str, Any], cfg: PretrainParams,
            group: Group = SINGLE) -> None:
    """Continue `state` from `checkpoint` (`save_checkpoint`'s), this process's RNG included;
    the rate of the next step is `cfg`'s schedule's, which differs from the checkpoint's only
    when extending a shorter run."""
    state.model.load_state_dict(checkpoint["model"])
    state.optimizer.load_state_dict(checkpoint["optimizer"])
    state.scheduler.load_state_dict(checkpoint["scheduler"])
    rate = lr_factor(checkpoint["step"], cfg.warmup_steps, cfg.max_steps, cfg.schedule)
    for param_group, base_lr in zip(state.optimizer.param_groups, state.scheduler.base_lrs,
                                    strict=True):
        param_group["lr"] = base_lr * rate
    if len(checkpoint["rng"]) == group.world_size:
        set_rng_state(checkpoint["rng"][group.rank])
    else:
        log.warning("resuming on %d processes from a checkpoint of %d: the dropout draws "
                    "differ from an uninterrupted run's", group.world_size, len(checkpoint["rng"]))
    state.step, state.seconds = checkpoint["step"], checkpoint["seconds"]
    # checkpoints written before the startup was timed apart count every step as steady
    state.startup_seconds = checkpoint.get("startup_seconds", 0.0)
    state.startup_steps = checkpoint.get("startup_steps", 0)
    state.smoothed_loss, state.val_loss = checkpoint["smoothed_loss"], checkpoint["val_loss"]
    state.history = MetricsHistory.from_state(checkpoint["history"])


def _latest_checkpoint(checkpoints: CheckpointStore | None, extend: CheckpointStore | None,
                       max_steps: int) -> dict[str, Any] | None:
    """The newest checkpoint of this run, else (none at all) the newest of the run it extends."""
    checkpoint = checkpoints.latest() if checkpoints is not None else None
    if checkpoint is None and extend is not None:
        checkpoint = extend.latest()
        if checkpoint is not None:
            log.warning("extending the run in %s from its step %d to max_steps %d (the "
                        "learning rate follows the schedule of %d steps from there)",
                        extend.directory, checkpoint["step"], max_steps, max_steps)
    return checkpoint


def resume(state: PretrainState, cfg: PretrainParams, group: Group,
           checkpoints: CheckpointStore | None, extend: CheckpointStore | None,
           report: MetricsCallback) -> None:
    """Restore `state` from the newest checkpoint in `checkpoints`, or else in `extend`, and
    replay its curves to `report`; with none, rank 0 clears `checkpoints` (a fresh run must not
    leave a stale one newest). Every process must find the same step."""
    checkpoint = _latest_checkpoint(checkpoints, extend, cfg.max_steps)
    if checkpoint is not None:
        restore(state, checkpoint, cfg, group)
        state.history.replay(report)
        log.info("resumed from the checkpoint of step %d", state.step)
    steps = group.gather(state.step)  # also a barrier: all have read before rank 0 may clear
    if len(set(steps)) > 1:
        raise RuntimeError(f"the processes found checkpoints of different steps {steps}: "
                           "they must all read one checkpoint folder")
    if checkpoint is None and checkpoints is not None and group.is_main:
        checkpoints.clear()


def _step_loss(model: Trunk, device: torch.device, group: Group, compiled: bool) -> nn.Module:
    """`model`'s LM loss as the steps run it: under DDP with several processes, and through
    `torch.compile` if `compiled`. DDP broadcasts rank 0's weights when it wraps them: build it
    after the checkpoint is loaded."""
    step_loss: nn.Module = _LMLoss(model)
    if group.parallel:
        step_loss = DistributedDataParallel(
            step_loss, device_ids=[device.index] if device.type == "cuda" else None)
    if compiled:
        step_loss = torch.compile(step_loss)
    return step_loss


@dataclass(frozen=True)
class _Session:
    """What stays fixed over the steps one process runs of a pretraining run."""

    cfg: PretrainParams
    group: Group
    placement: Placement
    train_windows: WindowSampler
    val_windows: WindowSampler
    step_loss: nn.Module  # `_step_loss`
    compiled: bool  # whether `step_loss` goes through torch.compile
    report: MetricsCallback  # rank 0's `on_metrics`; elsewhere a no-op
    checkpoints: CheckpointStore | None
    tokens_per_step: int  # over all processes
    flops_per_token: float
    peak: float  # FLOP/s of all processes together


def _shown(state: PretrainState, session: _Session, before: PretrainState) -> dict[str, float]:
    """The progress line's figures after the latest step; this session's steady throughput
    (`before`: the state's figures when the session started)."""
    tok_s = session.tokens_per_step * steady_rate(
        state.step - before.step, state.seconds - before.seconds,
        state.startup_steps - before.startup_steps,
        state.startup_seconds - before.startup_seconds)
    shown = {"loss": state.smoothed_loss, "tok_s": tok_s,
             "mfu%": 100 * tok_s * session.flops_per_token / session.peak}
    if not math.isnan(state.val_loss):
        shown["val"] = state.val_loss
    return shown


def _snapshotter(state: PretrainState, session: _Session) -> Callable[[], None]:
    """What keeps the model of each `cfg.snapshots` step in the run's checkpoint folder (rank 0;
    none without checkpoints): call it after each step, and at step 0."""
    store, steps = session.checkpoints, set(session.cfg.snapshots)

    def snapshot() -> None:
        if store is not None and session.group.is_main and state.step in steps:
            store.save_snapshot(state.step, state.model)

    return snapshot


def _train(state: PretrainState, session: _Session) -> None:
    """Step `state` on to `max_steps`, reporting the curves, evaluating and checkpointing as
    `cfg` says; StopRequested after the checkpoint of the step in which a SIGTERM or SIGINT came.
    The losses are read every `log_every` steps off the CPU (`loss_read_interval`), and before
    every evaluation and checkpoint: the curves and the checkpoints are complete to their step."""
    cfg, group, device = session.cfg, session.group, session.placement.device
    rows = group.rows(cfg.batch_size)
    train_step = TrainStep(session.placement, cfg.grad_clip, "pretrain", group.means,
                           loss_read_interval(device, cfg.log_every))
    before = copy.copy(state)  # its figures as the session starts
    start, started = state.step, time.perf_counter()
    snapshot = _snapshotter(state, session)
    if start == 0:
        snapshot()

    def record(read: list[StepLoss], evaluating: bool) -> None:
        """Report and keep the curves of the steps `read`; evaluate after the latest step if
        `evaluating` and it is among them."""
        for step, loss, lr in read:
            values = {"train/loss": loss, "lr": lr}
            if step == state.step and evaluating:
                state.val_loss = evaluate(state.model, session.val_windows, cfg.eval_batches,
                                          cfg.batch_size, device, session.placement.dtype,
                                          group)
                values["val/loss"] = state.val_loss
            session.report(step, values)
            state.history.record(step, values)

    with (StopSignals() if session.checkpoints is not None else contextlib.nullcontext()) as stop, \
            (StepProgress("pretrain", cfg.max_steps, cfg.log_every, log, start=start)
             if group.is_main else contextlib.nullcontext()) as progress:
        for index in range(start, cfg.max_steps):
            with record_function("data"):
                x, y = session.train_windows.batch(index, cfg.batch_size)
                x, y = to_device(x[rows], device), to_device(y[rows], device)
            train_step(state, index + 1, partial(session.step_loss, x, y))
            state.step = index + 1
            evaluating = state.step % cfg.eval_every == 0 or state.step == cfg.max_steps
            checkpointing = session.checkpoints is not None and (
                state.step % cfg.checkpoint_every == 0 or state.step == cfg.max_steps)
            read = train_step.read_losses(
                state, now=evaluating or checkpointing or state.step == start + 1)
            record(read, evaluating)
            # a signal may reach some processes only: any one of them stops them all, at a step
            # where all ask. Asking is a collective, which waits for the device: with several
            # processes they ask where they read the losses (every step on the CPU)
            asking = stop is not None and (bool(read) or not group.parallel)
            signum = int(group.max(stop.requested or 0)) if asking else 0
            if signum:  # checkpointed now, with the curves to this step
                checkpointing = True
                rest = train_step.read_losses(state, now=True)
                record(rest, evaluating)
                read += rest
            state.seconds = before.seconds + time.perf_counter() - started
            if state.step == start + 1:
                state.startup_seconds += state.seconds - before.seconds
                state.startup_steps += 1
                log.info("first step in %.1f s%s", state.seconds - before.seconds,
                         " (compiling it)" if session.compiled else "")
            if progress is not None and read:
                progress.update(state.step, **_shown(state, session, before))
            snapshot()
            if checkpointing:
                path = save_checkpoint(state, session.checkpoints, group)
                if signum and state.step < cfg.max_steps:
                    raise StopRequested(signum, state.step, path)


def pretrain(model: Trunk, train: list[np.ndarray], val: list[np.ndarray], cfg: PretrainParams,
             on_metrics: MetricsCallback | None = None,
             checkpoints: CheckpointStore | None = None,
             group: Group = SINGLE, extend: CheckpointStore | None = None) -> PretrainResult:
    """Train `model` in place for `cfg.max_steps` steps; `on_metrics(step, values)` sees the curves.

    With `checkpoints`, the run resumes from the newest checkpoint of the same settings, saves one
    every `cfg.checkpoint_every` steps and at the end, and on SIGTERM/SIGINT saves one after the
    current step and raises `StopRequested`. A resumed run ends bit-identical to an uninterrupted
    one on the CPU: the batches depend only on the step, and the RNG states are restored.

    With a `group` of several processes (torchrun, `gpt1.training.distributed.process_group`)
    training is data-parallel: `cfg.batch_size` is the global batch, each process computes its
    rows of the same batch, and DDP averages the gradients, so the run follows the one-process
    trajectory (to rounding; dropout draws differ). Only rank 0 calls `on_metrics`, shows
    progress and writes checkpoints; every process reads them to resume, and all stop at the same
    step: on a signal to any of them, the next step whose losses they read (off the CPU, at most
    `cfg.log_every` steps later).

    With `extend` (the checkpoints of a run whose settings differ only in a smaller
    `max_steps`) and none of its own, the run continues from that run's newest checkpoint
    instead of starting afresh: the steps done keep the learning rates they had, and from the
    resumed step on the rate follows this run's schedule (warmup, then decay to zero at this
    `cfg.max_steps`), so a run stopped at the end of a cosine decay warms back up to the value
    the longer schedule has at that step.
    """
    if cfg.batch_size % group.world_size:
        raise InputError(f"pretrain.batch_size ({cfg.batch_size}) is the global batch: it must "
                         f"be divisible by the number of processes ({group.world_size})")
    place = placement(group.device(cfg.device), cfg.precision)
    torch.manual_seed(cfg.seed + group.rank)  # each process draws its own dropout masks
    n_ctx = model.config.n_ctx
    train_windows = WindowSampler(train, n_ctx, cfg.seed, "train")
    val_windows = WindowSampler(val, n_ctx, cfg.seed + 1, "val")
    state = new_state(model, cfg, place.device)
    report = (on_metrics if on_metrics is not None and group.is_main
              else lambda step, values: None)
    peak = (cfg.peak_tflops * 1e12 if cfg.peak_tflops is not None
            else measure_peak_flops(place.device, place.dtype)) * group.world_size
    log.info("pretraining %.2fM parameters on %d x %s (%s%s) for %d steps of %d x %d tokens; "
             "peak %.3g TFLOP/s (%s)", model.num_parameters() / 1e6, group.world_size,
             place.device, str(place.dtype).removeprefix("torch."),
             ", compiled" if resolve_compile(cfg.compile, place.device) else "", cfg.max_steps,
             cfg.batch_size, n_ctx, peak / 1e12,
             "configured" if cfg.peak_tflops is not None else "measured")
    resume(state, cfg, group, checkpoints, extend, report)
    start = state.step
    compiled = resolve_compile(cfg.compile, place.device)
    session = _Session(cfg, group, place, train_windows, val_windows,
                       _step_loss(model, place.device, group, compiled), compiled, report,
                       checkpoints, tokens_per_step=cfg.batch_size * n_ctx,
                       flops_per_token=model.config.training_flops_per_token(), peak=peak)
    _train(state, session)
    tok_s = session.tokens_per_step * steady_rate(state.step, state.seconds, state.startup_steps,
                                                  state.startup_seconds)
    mfu = tok_s * session.flops_per_token / session.peak
    log.info("trained at %.4g tokens/s (MFU %.1f%%) once started; first steps %.1f s", tok_s,
             100 * mfu, state.startup_seconds)
    return PretrainResult(steps=cfg.max_steps, train_loss=state.smoothed_loss,
                          val_loss=state.val_loss, tokens=cfg.max_steps * session.tokens_per_step,
                          seconds=state.seconds, startup_seconds=state.startup_seconds,
                          startup_steps=state.startup_steps, mfu=mfu, peak_flops=peak,
                          resumed_from=start,
                          compute=place.record(compiled, group.world_size))
