"""Task metrics as the paper reports them, from scikit-learn."""

from __future__ import annotations

import numpy as np
from sklearn.metrics import accuracy_score, matthews_corrcoef


def score(metric: str, labels: np.ndarray, predictions: np.ndarray) -> dict[str, float]:
    """`{metric: value in percent}` for the task's metric."""
    if metric == "accuracy":
        return {"accuracy": 100.0 * float(accuracy_score(labels, predictions))}
    if metric == "mcc":  # Matthews correlation, as the paper reports CoLA
        return {"mcc": 100.0 * float(matthews_corrcoef(labels, predictions))}
    raise ValueError(f"unknown metric {metric!r}")
