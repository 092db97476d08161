"""Stop a training run whose loss has diverged, with the step and the value, rather than let it
"succeed" with garbage weights (an STS-B score of 1e9 once trained to a loss of 1.6e16)."""

from __future__ import annotations

import math

from gpt1.errors import InputError

# A loss this many times its first value has diverged: at the start a model is as unsure as it
# will ever be, so a working run's loss only falls from there (noise is a few percent).
DIVERGED_FACTOR = 100.0


class TrainingDiverged(InputError, FloatingPointError):
    """The loss went non-finite or diverged: the params (the learning rate) or the data are the
    user's to change; run again as it is, it diverges again."""


class DivergenceGuard:
    """`check(step, loss)` raises TrainingDiverged once `loss` is not finite or is more than
    `DIVERGED_FACTOR` times the first loss it saw."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.first: float | None = None

    def check(self, step: int, loss: float) -> None:
        if not math.isfinite(loss):
            raise TrainingDiverged(f"{self.what}: the loss became {loss} at step {step}; "
                                     "lower the learning rate or check the data")
        if self.first is None:
            self.first = loss
        elif loss > DIVERGED_FACTOR * self.first > 0:
            raise TrainingDiverged(
                f"{self.what}: the loss diverged to {loss:.4g} at step {step} (it started at "
                f"{self.first:.4g}); lower the learning rate or check the data")
