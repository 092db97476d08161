"""Task metrics as the paper reports them, in percent: accuracy, Matthews' correlation (CoLA),
F1 of the positive class (MRPC, QQP), Pearson's and Spearman's correlations (STS-B).

Written here on NumPy, each a few lines, rather than called from scikit-learn and SciPy: every
stage that fine-tunes is a process of its own, and importing `sklearn.metrics` costs it 1.5 s,
`scipy.stats` 1.1 s (measured beside torch) - more than a tiny preset's whole fine-tuning.
tests/downstream/test_metrics.py holds each to scikit-learn's or SciPy's on random inputs."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

MetricFn = Callable[[np.ndarray, np.ndarray], float]


def accuracy(y: np.ndarray, p: np.ndarray) -> float:
    return float(np.mean(y == p))


def matthews(y: np.ndarray, p: np.ndarray) -> float:
    """Matthews' correlation coefficient over any number of classes (Gorodkin's R_K, as
    scikit-learn computes it); 0 where predictions or labels are constant."""
    _, codes = np.unique(np.concatenate([y, p]), return_inverse=True)
    k = int(codes.max()) + 1
    confusion = np.bincount(codes[:len(y)] * k + codes[len(y):], minlength=k * k).reshape(k, k)
    true, pred = confusion.sum(axis=1).astype(float), confusion.sum(axis=0).astype(float)
    n, correct = float(len(y)), float(np.trace(confusion))
    denominator = np.sqrt((n * n - pred @ pred) * (n * n - true @ true))
    return 0.0 if denominator == 0 else float((correct * n - true @ pred) / denominator)


def f1_positive(y: np.ndarray, p: np.ndarray) -> float:
    """F1 of label 1, 2 TP / (2 TP + FP + FN); 0 where no example is predicted or labelled 1."""
    tp = np.sum((y == 1) & (p == 1))
    fp, fn = np.sum((y != 1) & (p == 1)), np.sum((y == 1) & (p != 1))
    return 0.0 if tp == 0 else float(2 * tp / (2 * tp + fp + fn))


def pearson(y: np.ndarray, p: np.ndarray) -> float:
    """Pearson's r; 0 where predictions or labels do not vary (undefined there: a collapsed
    regression head predicts a constant), as Matthews' coefficient is 0 for a constant
    predictor."""
    y, p = np.asarray(y, dtype=float), np.asarray(p, dtype=float)
    if np.ptp(y) == 0 or np.ptp(p) == 0:
        return 0.0
    dy, dp = y - y.mean(), p - p.mean()
    return float(np.clip(dy @ dp / np.sqrt((dy @ dy) * (dp @ dp)), -1.0, 1.0))


def average_ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks of `values`, ties given the mean of the ranks they span."""
    order = np.argsort(values, kind="stable")
    _, first, counts = np.unique(values[order], return_index=True, return_counts=True)
    ranks = np.empty(len(values))
    ranks[order] = np.repeat(first + (counts + 1) / 2, counts)
    return ranks


def spearman(y: np.ndarray, p: np.ndarray) -> float:
    """Spearman's rho: Pearson's r of the ranks."""
    return pearson(average_ranks(np.asarray(y, dtype=float)),
                   average_ranks(np.asarray(p, dtype=float)))


_METRICS: dict[str, MetricFn] = {
    "accuracy": accuracy,
    "mcc": matthews,  # CoLA
    "f1": f1_positive,  # MRPC, QQP: F1 of the positive class (label 1)
    "pearson": pearson,  # STS-B
    "spearman": spearman,
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
