"""gpt1.training.step: the optimisation step pretraining and fine-tuning share."""

from __future__ import annotations

import math

import pytest
import torch

from gpt1.training.device import Placement
from gpt1.training.optim import build_optimizer, build_scheduler
from gpt1.training.step import (
    StepLoss,
    TrainingState,
    TrainStep,
    loss_read_interval,
    smooth,
)

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
    step = TrainStep(CPU, grad_clip=0.5, what="test")
    step(ours, 1, lambda: _loss(ours.model, x))
    [read] = step.read_losses(ours)

    loss = _loss(reference.model, x)
    reference.optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(reference.model.parameters(), 0.5)
    reference.optimizer.step()
    reference.scheduler.step()

    assert read.step == 1
    assert read.loss == loss.item() == ours.smoothed_loss  # the first loss starts the average
    assert read.lr == reference.scheduler.get_last_lr()[0]
    for a, b in zip(ours.model.parameters(), reference.model.parameters(), strict=True):
        assert torch.equal(a, b)
    assert ours.scheduler.get_last_lr() == reference.scheduler.get_last_lr()


def test_the_loss_is_reduced_then_checked_and_smoothed() -> None:
    state = _state()
    x = torch.ones(2, 3)
    step = TrainStep(CPU, 1.0, "pretrain", reduce=lambda losses: [2.0] * len(losses))
    step(state, 1, lambda: _loss(state.model, x))
    assert [r.loss for r in step.read_losses(state)] == [2.0]
    assert state.smoothed_loss == 2.0
    diverged = TrainStep(CPU, 1.0, "pretrain", reduce=lambda losses: [math.nan] * len(losses))
    diverged(state, 2, lambda: _loss(state.model, x))
    with pytest.raises(FloatingPointError, match="pretrain: the loss became nan at step 2"):
        diverged.read_losses(state)


def _run(read_every: int, steps: int, now: set[int] = frozenset()) -> tuple[
        list[list[StepLoss]], TrainingState]:
    """`steps` steps on random batches; what each step's `read_losses` returned."""
    state = _state()
    step = TrainStep(CPU, 1.0, "test", read_every=read_every)
    xs = torch.randn(steps, 4, 3, generator=torch.Generator().manual_seed(2))
    reads = []
    for number in range(1, steps + 1):
        step(state, number, lambda number=number: _loss(state.model, xs[number - 1]))
        reads.append(step.read_losses(state, now=number in now))
    return reads, state


def test_losses_wait_on_the_device_until_a_read_is_due() -> None:
    every, every_fourth = _run(1, 10), _run(4, 10, now={6})
    assert [len(r) for r in every_fourth[0]] == [0, 0, 0, 4, 0, 2, 0, 2, 0, 0]
    read = [loss for r in every_fourth[0] for loss in r]
    assert read == [loss for r in every[0][:8] for loss in r]  # the same losses, in order
    assert [r.step for r in read] == list(range(1, 9))
    # the smoothed loss folds in the 8 read, not the 2 waiting
    assert every_fourth[1].smoothed_loss == _run(1, 8)[1].smoothed_loss
    assert every_fourth[1].smoothed_loss != every[1].smoothed_loss


def test_a_read_reduces_its_losses_together() -> None:
    """With several processes, `reduce` is a collective: one per read, not one per step."""
    state, reduced = _state(), []
    step = TrainStep(CPU, 1.0, "pretrain", read_every=3,
                     reduce=lambda losses: reduced.append(losses) or [2 * v for v in losses])
    x, computed = torch.ones(2, 3), []

    def forward() -> torch.Tensor:
        computed.append(_loss(state.model, x))
        return computed[-1]

    for number in range(1, 4):
        step(state, number, forward)
    read = step.read_losses(state)
    losses = [loss.item() for loss in computed]
    assert reduced == [losses]
    assert [r.loss for r in read] == [2 * v for v in losses]


def test_a_loss_read_late_names_the_step_it_diverged_at() -> None:
    state = _state()
    step = TrainStep(CPU, 1.0, "finetune", read_every=5)
    x = torch.ones(2, 3)
    for number, scale in enumerate([1.0, 1.0, math.inf, 1.0], 1):
        step(state, number, lambda scale=scale: _loss(state.model, x) * scale)
        assert step.read_losses(state) == []
    with pytest.raises(FloatingPointError, match="finetune: the loss became inf at step 3"):
        step.read_losses(state, now=True)


def test_losses_are_read_every_step_on_the_cpu_and_at_log_steps_elsewhere() -> None:
    assert loss_read_interval(torch.device("cpu"), 50) == 1
    assert loss_read_interval(torch.device("cuda"), 50) == 50
    assert loss_read_interval(torch.device("cuda"), 0) == 1


def test_smoothing() -> None:
    assert smooth(math.nan, 3.0) == 3.0
    assert smooth(3.0, 1.0) == pytest.approx(2.8)
