"""gpt1.downstream.metrics: task metrics in percent, as the paper reports them."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpt1.downstream.metrics import score


def test_accuracy_in_percent() -> None:
    labels = np.array([0, 1, 1, 0, 1, 0, 0, 1])
    preds = np.array([0, 1, 0, 0, 1, 1, 0, 1])
    assert score(["accuracy"], labels, preds) == {"accuracy": pytest.approx(75.0)}
    assert score(["accuracy"], labels, labels) == {"accuracy": 100.0}
    assert score(["accuracy"], labels, 1 - labels) == {"accuracy": 0.0}


def test_values_are_plain_floats() -> None:
    values = score(["accuracy", "f1", "mcc"], np.array([1, 1, 0]), np.array([1, 0, 0]))
    assert all(type(v) is float for v in values.values())  # JSON-serialisable, not NumPy
    assert values["accuracy"] == pytest.approx(200 / 3)


def test_matthews_correlation_in_percent() -> None:
    labels = np.array([1, 1, 1, 0, 0, 0])
    preds = np.array([1, 1, 0, 0, 0, 1])
    # tp=2 tn=2 fp=1 fn=1: (4 - 1) / sqrt(3 * 3 * 3 * 3) = 1/3
    assert score(["mcc"], labels, preds) == {"mcc": pytest.approx(100 / 3)}
    assert score(["mcc"], labels, labels)["mcc"] == pytest.approx(100.0)
    assert score(["mcc"], labels, 1 - labels)["mcc"] == pytest.approx(-100.0)
    assert score(["mcc"], labels, np.ones_like(labels))["mcc"] == 0.0  # constant predictions


def test_correlations_of_a_constant_predictor_are_zero() -> None:
    """SciPy's Pearson and Spearman are undefined (NaN) for constant predictions, which a
    collapsed regression head gives; they count as no correlation, as MCC counts them."""
    labels = np.array([0.5, 2.0, 3.5, 4.0])
    got = score(["pearson", "spearman"], labels, np.full(4, 0.684))
    assert got == {"pearson": 0.0, "spearman": 0.0}
    assert score(["pearson"], np.full(4, 2.0), labels) == {"pearson": 0.0}
    assert score(["pearson"], labels, labels * 2 + 1)["pearson"] == pytest.approx(100.0)


def test_f1_of_the_positive_class_with_accuracy() -> None:
    labels = np.array([1, 1, 1, 1, 0, 0])
    preds = np.array([1, 1, 1, 0, 1, 0])
    # tp=3 fp=1 fn=1: precision 3/4, recall 3/4, F1 3/4; accuracy 4/6
    assert score(["f1", "accuracy"], labels, preds) == {
        "f1": pytest.approx(75.0), "accuracy": pytest.approx(400 / 6)}


def test_pearson_and_spearman_in_percent() -> None:
    gold = np.array([0.0, 1.0, 2.5, 4.0, 5.0])
    assert score(["pearson", "spearman"], gold, 2 * gold + 1) == {
        "pearson": pytest.approx(100.0), "spearman": pytest.approx(100.0)}
    monotone = np.exp(gold)  # same order, not linear
    values = score(["pearson", "spearman"], gold, monotone)
    assert values["spearman"] == pytest.approx(100.0) and values["pearson"] < 95.0
    x, y = gold - gold.mean(), monotone - monotone.mean()
    assert values["pearson"] == pytest.approx(100 * (x @ y) / math.sqrt((x @ x) * (y @ y)))


def test_unknown_metric() -> None:
    with pytest.raises(ValueError, match=r"unknown metrics \['f1_macro'\]"):
        score(["f1_macro"], np.array([0]), np.array([0]))


def test_predictions_must_match_labels() -> None:
    with pytest.raises(ValueError, match="2 predictions for 3 labels"):
        score(["accuracy"], np.array([0, 1, 1]), np.array([0, 1]))
