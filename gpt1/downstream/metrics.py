"""Task metrics as the paper reports them, from scikit-learn and SciPy, in percent."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

MetricFn = Callable[[np.ndarray, np.ndarray], float]


def _correlation(coefficient: Callable) -> MetricFn:
    """A SciPy correlation coefficient, 0 where predictions or labels do not vary: undefined
    there (SciPy gives NaN), and 0 as Matthews' coefficient is 0 for a constant predictor."""
    def metric(y: np.ndarray, p: np.ndarray) -> float:
        if np.ptp(p) == 0 or np.ptp(y) == 0:
            return 0.0
        return float(coefficient(y, p).statistic)
    return metric


_METRICS: dict[str, MetricFn] = {
    "accuracy": lambda y, p: float(accuracy_score(y, p)),
    "mcc": lambda y, p: float(matthews_corrcoef(y, p)),  # CoLA
    "f1": lambda y, p: float(f1_score(y, p)),  # MRPC, QQP: F1 of the positive class (label 1)
    "pearson": _correlation(pearsonr),  # STS-B
    "spearman": _correlation(spearmanr),
}


def score(metrics: list[str], labels: np.ndarray, predictions: np.ndarray) -> dict[str, float]:
    """`{metric: value in percent}` for each of `metrics`; `predictions` are class indices, or
    scores for the correlation metrics."""
    unknown = [m for m in metrics if m not in _METRICS]
    if unknown:
        raise ValueError(f"unknown metrics {unknown}; known: {sorted(_METRICS)}")
    if len(labels) != len(predictions) or not len(labels):
        raise ValueError(f"need as many predictions as labels, at least one: got "
                         f"{len(predictions)} predictions for {len(labels)} labels")
    return {m: 100.0 * _METRICS[m](labels, predictions) for m in metrics}
