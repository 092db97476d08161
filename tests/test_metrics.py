"""gpt1.metrics: task metrics in percent, as the paper reports them."""

from __future__ import annotations

import numpy as np
import pytest

from gpt1.metrics import score


def test_accuracy_in_percent() -> None:
    labels = np.array([0, 1, 1, 0, 1, 0, 0, 1])
    preds = np.array([0, 1, 0, 0, 1, 1, 0, 1])
    assert score("accuracy", labels, preds) == {"accuracy": pytest.approx(75.0)}
    assert score("accuracy", labels, labels) == {"accuracy": 100.0}
    assert score("accuracy", labels, 1 - labels) == {"accuracy": 0.0}


def test_accuracy_returns_plain_floats() -> None:
    value = score("accuracy", np.array([1, 1, 0]), np.array([1, 0, 0]))["accuracy"]
    assert type(value) is float  # JSON-serialisable, not a NumPy scalar
    assert value == pytest.approx(200 / 3)


def test_matthews_correlation_in_percent() -> None:
    labels = np.array([1, 1, 1, 0, 0, 0])
    preds = np.array([1, 1, 0, 0, 0, 1])
    # tp=2 tn=2 fp=1 fn=1: (4 - 1) / sqrt(3 * 3 * 3 * 3) = 1/3
    assert score("mcc", labels, preds) == {"mcc": pytest.approx(100 / 3)}
    assert score("mcc", labels, labels)["mcc"] == pytest.approx(100.0)
    assert score("mcc", labels, 1 - labels)["mcc"] == pytest.approx(-100.0)
    assert score("mcc", labels, np.ones_like(labels))["mcc"] == 0.0  # constant predictions


def test_unknown_metric() -> None:
    with pytest.raises(ValueError, match="unknown metric 'f1_macro'"):
        score("f1_macro", np.array([0]), np.array([0]))
