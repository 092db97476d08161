"""gpt1.training.divergence: a run whose loss is no longer finite, or has blown up, stops and says
so."""

from __future__ import annotations

import math

import pytest

from gpt1.training.divergence import DIVERGED_FACTOR, DivergenceGuard


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_non_finite_loss_stops_the_run(bad: float) -> None:
    guard = DivergenceGuard("finetune")
    guard.check(1, 0.7)
    with pytest.raises(FloatingPointError, match=rf"finetune: the loss became {bad} at step 2"):
        guard.check(2, bad)


def test_a_loss_far_above_its_start_stops_the_run() -> None:
    guard = DivergenceGuard("pretrain")
    guard.check(1, 9.0)
    guard.check(2, 0.99 * DIVERGED_FACTOR * 9.0)  # just below the line: still training
    with pytest.raises(FloatingPointError,
                       match=r"pretrain: the loss diverged to 909 at step 3 \(it started "
                             r"at 9\)"):
        guard.check(3, 1.01 * DIVERGED_FACTOR * 9.0)


def test_a_noisy_falling_loss_passes() -> None:
    guard = DivergenceGuard("finetune")
    for step, loss in enumerate([2.0, 2.3, 1.5, 1.9, 0.4, 0.0, 0.1], start=1):
        guard.check(step, loss)
