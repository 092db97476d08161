"""One optimisation step, the same in pretraining and fine-tuning: the forward pass under
autocast, the backward pass, gradient clipping, the optimiser and learning-rate schedule stepped,
then the loss checked for divergence and folded into a smoothed value for progress displays."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.profiler import record_function

from gpt1.training.device import Placement, autocast
from gpt1.training.divergence import DivergenceGuard


@dataclass
class TrainingState:
    """What every step updates: the weights (through the optimiser), the learning rate (through
    the schedule) and the smoothed training loss (NaN before the first step)."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    smoothed_loss: float = math.nan


def smooth(smoothed: float, loss: float) -> float:
    """The exponential moving average of the training loss after `loss`, 0.9 of it the past."""
    return loss if math.isnan(smoothed) else 0.9 * smoothed + 0.1 * loss


def _same(loss: float) -> float:
    return loss


class TrainStep:
    """`step(state, number, forward)` runs optimisation step `number` (1-based) on `state`, with
    `forward()` computing the loss, and returns the loss's value.

    The gradients are clipped to a norm of `grad_clip`. `reduce` turns this process's loss into
    the run's (with several data-parallel processes, the mean over them) before the divergence
    check, which raises FloatingPointError naming `what` once the loss is no longer finite or has
    blown up (`DivergenceGuard`).
    """

    def __init__(self, placement: Placement, grad_clip: float, what: str,
                 reduce: Callable[[float], float] = _same) -> None:
        self.placement, self.grad_clip, self.reduce = placement, grad_clip, reduce
        self.guard = DivergenceGuard(what)

    def __call__(self, state: TrainingState, number: int,
                 forward: Callable[[], torch.Tensor]) -> float:
        with autocast(self.placement.device, self.placement.dtype):
            loss = forward()
        state.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        with record_function("optimizer"):
            torch.nn.utils.clip_grad_norm_(state.model.parameters(), self.grad_clip)
            state.optimizer.step()
            state.scheduler.step()
        value = self.reduce(loss.item())
        self.guard.check(number, value)
        state.smoothed_loss = smooth(state.smoothed_loss, value)
        return value
