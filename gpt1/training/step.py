"""One optimisation step, the same in pretraining and fine-tuning: the forward pass under
autocast, the backward pass, gradient clipping, the optimiser and learning-rate schedule stepped.

A step leaves its loss on the device: reading a value makes the host wait for the device, and a
host that waits every step leaves a GPU idle while it prepares the next one. The losses are read
a batch of steps at a time (`TrainStep.read_losses`), then checked for divergence and folded
into a smoothed value for progress displays."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import nn
from torch.profiler import record_function

from gpt1.training.device import Placement, autocast
from gpt1.training.divergence import DivergenceGuard


@dataclass
class TrainingState:
    """What every step updates: the weights (through the optimiser), the learning rate (through
    the schedule) and the smoothed training loss (NaN before the first loss is read)."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    smoothed_loss: float = math.nan


class StepLoss(NamedTuple):
    step: int
    loss: float
    lr: float  # the learning rate the step left for the next one


def smooth(smoothed: float, loss: float) -> float:
    """The exponential moving average of the training loss after `loss`, 0.9 of it the past."""
    return loss if math.isnan(smoothed) else 0.9 * smoothed + 0.1 * loss


def loss_read_interval(device: torch.device, log_every: int) -> int:
    """Steps between reads of the losses: every step on the CPU, which computes each before the
    host goes on anyway; elsewhere the steps between two progress lines."""
    return 1 if device.type == "cpu" else max(1, log_every)


@dataclass
class _Pending:
    step: int
    loss: torch.Tensor
    lr: float


class TrainStep:
    """`step(state, number, forward)` runs optimisation step `number` (1-based) on `state`, with
    `forward()` computing the loss; `step.read_losses(state)` then returns the losses of the steps
    run since the last read, every `read_every` steps (or when asked to).

    The gradients are clipped to a norm of `grad_clip`. `reduce` turns this process's losses, as
    read, into the run's (with several data-parallel processes, their means over the processes,
    in one collective) before the divergence check, which raises FloatingPointError naming `what`
    and the step once a loss read is no longer finite or has blown up (`DivergenceGuard`).
    """

    def __init__(self, placement: Placement, grad_clip: float, what: str,
                 reduce: Callable[[list[float]], list[float]] = list, read_every: int = 1) -> None:
        self.placement, self.grad_clip, self.reduce = placement, grad_clip, reduce
        self.read_every = read_every
        self.guard = DivergenceGuard(what)
        self._pending: list[_Pending] = []

    def __call__(self, state: TrainingState, number: int,
                 forward: Callable[[], torch.Tensor]) -> None:
        with autocast(self.placement.device, self.placement.dtype):
            loss = forward()
        state.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        with record_function("optimizer"):
            torch.nn.utils.clip_grad_norm_(state.model.parameters(), self.grad_clip)
            state.optimizer.step()
            state.scheduler.step()
        self._pending.append(_Pending(number, loss.detach(), state.scheduler.get_last_lr()[0]))

    def read_losses(self, state: TrainingState, now: bool = False) -> list[StepLoss]:
        """The steps run since the last read with their losses, in order, if the latest one is a
        `read_every`-th step or `now`; else none, and the losses wait on the device."""
        if not self._pending or not (now or self._pending[-1].step % self.read_every == 0):
            return []
        pending, self._pending = self._pending, []
        with record_function("read losses"):
            values = torch.stack([p.loss.float() for p in pending]).tolist()  # one wait
            values = self.reduce(values)
        read = []
        for p, value in zip(pending, values, strict=True):
            self.guard.check(p.step, value)
            state.smoothed_loss = smooth(state.smoothed_loss, value)
            read.append(StepLoss(p.step, value, p.lr))
        return read
