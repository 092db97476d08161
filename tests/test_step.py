"""gpt1.training.step: the optimisation step pretraining and fine-tuning share."""

from __future__ import annotations

import math

import pytest
import torch

from gpt1.training.device import Placement
from gpt1.training.optim import build_optimizer, build_scheduler
from gpt1.training.step import TrainingState, TrainStep, smooth

CPU = Placement(torch.device("cpu"), torch.float32)


def _state(seed: int = 0) -> TrainingState:
    torch.manual_seed(seed)
    model = torch.nn.Linear(3, 1)
    optimizer = build_optimizer(model, 0.1, 0.01, CPU.device)
    return TrainingState(model, optimizer, build_scheduler(optimizer, 2, 10, "linear"))


def _loss(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    return model(x).pow(2).mean()


def test_a_step_is_the_usual_one() -> None:
    x = torch.randn(8, 3, generator=torch.Generator().manual_seed(1))
    ours, reference = _state(), _state()
    value = TrainStep(CPU, grad_clip=0.5, what="test")(ours, 1, lambda: _loss(ours.model, x))

    loss = _loss(reference.model, x)
    reference.optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(reference.model.parameters(), 0.5)
    reference.optimizer.step()
    reference.scheduler.step()

    assert value == loss.item() == ours.smoothed_loss  # the first loss starts the average
    for a, b in zip(ours.model.parameters(), reference.model.parameters(), strict=True):
        assert torch.equal(a, b)
    assert ours.scheduler.get_last_lr() == reference.scheduler.get_last_lr()


def test_the_loss_is_reduced_then_checked_and_smoothed() -> None:
    state = _state()
    x = torch.ones(2, 3)
    step = TrainStep(CPU, 1.0, "pretrain", reduce=lambda loss: 2.0)
    assert step(state, 1, lambda: _loss(state.model, x)) == 2.0
    assert state.smoothed_loss == 2.0
    diverged = TrainStep(CPU, 1.0, "pretrain", reduce=lambda loss: math.nan)
    with pytest.raises(FloatingPointError, match="pretrain: the loss became nan at step 2"):
        diverged(state, 2, lambda: _loss(state.model, x))


def test_smoothing() -> None:
    assert smooth(math.nan, 3.0) == 3.0
    assert smooth(3.0, 1.0) == pytest.approx(2.8)
