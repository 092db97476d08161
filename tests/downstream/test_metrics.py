"""gpt1.downstream.metrics: task metrics in percent, as the paper reports them."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import scipy.stats
import sklearn.metrics
from hypothesis import given, settings
from hypothesis import strategies as st

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


# Each metric against the library that defines it, on random inputs: scikit-learn's
# accuracy_score, matthews_corrcoef and f1_score, SciPy's pearsonr and spearmanr.
labels_and_predictions = st.integers(1, 40).flatmap(lambda n: st.tuples(
    st.lists(st.integers(0, 2), min_size=n, max_size=n),
    st.lists(st.integers(0, 2), min_size=n, max_size=n)))


@settings(max_examples=200, deadline=None)
@given(labels_and_predictions)
def test_classification_metrics_as_scikit_learn(pair: tuple[list[int], list[int]]) -> None:
    y, p = np.array(pair[0]), np.array(pair[1])
    got = score(["accuracy", "mcc", "f1"], y, p)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scikit-learn warns where F1 or MCC is undefined
        expected = {"accuracy": sklearn.metrics.accuracy_score(y, p),
                    "mcc": sklearn.metrics.matthews_corrcoef(y, p),
                    "f1": sklearn.metrics.f1_score(y, p, labels=[1], average="micro",
                                                   zero_division=0.0)}
    assert got == {k: pytest.approx(100 * v, abs=1e-9) for k, v in expected.items()}


@settings(max_examples=200, deadline=None)
@given(st.integers(3, 40).flatmap(lambda n: st.tuples(
    st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.5, 4.0, 5.0]), min_size=n, max_size=n),
    st.lists(st.floats(-3, 8, allow_nan=False), min_size=n, max_size=n))))
def test_correlations_as_scipy(pair: tuple[list[float], list[float]]) -> None:
    y, p = np.array(pair[0]), np.array(pair[1])
    got = score(["pearson", "spearman"], y, p)
    for name, reference in (("pearson", scipy.stats.pearsonr), ("spearman", scipy.stats.spearmanr)):
        if np.ptp(y) == 0 or np.ptp(p) == 0:
            assert got[name] == 0.0  # SciPy: NaN, undefined
        else:
            assert got[name] == pytest.approx(100 * reference(y, p).statistic, abs=1e-7)
