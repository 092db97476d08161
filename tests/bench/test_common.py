"""`bench.common.alternate`: the sides take turns, the one that starts rotating each round, and
with a warm-up each is first called once untimed."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bench.common import alternate, round_orders


def _recording(names: str, calls: list[str]) -> dict[str, Callable[[], float]]:
    """Sides that record each call and return how often they were called."""
    def side(name: str) -> Callable[[], float]:
        def run() -> float:
            calls.append(name)
            return float(calls.count(name))
        return run
    return {name: side(name) for name in names}


def test_a_warm_up_calls_each_side_once_untimed_then_the_start_rotates() -> None:
    calls: list[str] = []
    values = alternate(_recording("abc", calls), 4, warmup=True)
    assert calls == [*"abc", *"abc", *"bca", *"cab", *"abc"]
    assert values == {name: [2.0, 3.0, 4.0, 5.0] for name in "abc"}  # the warm-ups' 1 dropped


def test_without_a_warm_up_the_rounds_alone_run() -> None:
    calls: list[str] = []
    values = alternate(_recording("ab", calls), 3)
    assert calls == [*"ab", *"ba", *"ab"]
    assert values == {name: [1.0, 2.0, 3.0] for name in "ab"}


def test_round_orders_start_with_each_side_in_turn() -> None:
    assert round_orders(["ours", "transformers", "compiled"], 4) == [
        ["ours", "transformers", "compiled"], ["transformers", "compiled", "ours"],
        ["compiled", "ours", "transformers"], ["ours", "transformers", "compiled"]]
    assert round_orders(["one"], 2) == [["one"], ["one"]]


def test_no_rounds_are_refused() -> None:
    with pytest.raises(ValueError, match="repeats must be >= 1"):
        alternate({"a": lambda: 1.0}, 0, warmup=True)
