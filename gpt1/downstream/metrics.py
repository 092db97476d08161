"""Task metrics as the paper reports them, from scikit-learn and SciPy, in percent."""

from __future__ import annotations

import importlib
from collections.abc import Callable

import numpy as np

MetricFn = Callable[[np.ndarray, np.ndarray], float]


def _library(module: str, name: str) -> Callable:
    """`module.name`, imported on first use: scikit-learn and scipy.stats take 0.9 s to import,
    which every stage importing this module paid at start, scoring something or not (a task
    without data, the report, the zero-shot stage of an absent task)."""
    return getattr(importlib.import_module(module), name)


def _sklearn(name: str) -> MetricFn:
    return lambda y, p: float(_library("sklearn.metrics", name)(y, p))


def _correlation(name: str) -> MetricFn:
    """scipy.stats' correlation coefficient `name`, 0 where predictions or labels do not vary:
    undefined there (SciPy gives NaN), and 0 as Matthews' coefficient is 0 for a constant
    predictor."""
    def metric(y: np.ndarray, p: np.ndarray) -> float:
        if np.ptp(p) == 0 or np.ptp(y) == 0:
            return 0.0
        return float(_library("scipy.stats", name)(y, p).statistic)
    return metric


_METRICS: dict[str, MetricFn] = {
    "accuracy": _sklearn("accuracy_score"),
    "mcc": _sklearn("matthews_corrcoef"),  # CoLA
    "f1": _sklearn("f1_score"),  # MRPC, QQP: F1 of the positive class (label 1)
    "pearson": _correlation("pearsonr"),  # STS-B
    "spearman": _correlation("spearmanr"),
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
