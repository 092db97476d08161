"""gpt1.corpus.parallel: an order-preserving process map that never reads far ahead of its
consumer."""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Iterator

import pytest

from gpt1.corpus.parallel import bounded_map, resolve_workers

# Functions handed to worker processes must be importable (spawn): module level.


def slow_square(x: int) -> tuple[int, int]:
    time.sleep(0.05 if x % 2 == 0 else 0.0)  # even items finish after the odd ones behind them
    return x * x, os.getpid()


def double(x: int) -> int:
    return 2 * x


def fail_on_three(x: int) -> int:
    if x == 3:
        raise ValueError("three is not allowed")
    return x


def test_resolve_workers() -> None:
    assert resolve_workers(3) == 3
    assert resolve_workers(0) == len(os.sched_getaffinity(0)) >= 1


def test_order_is_preserved_with_two_workers() -> None:
    out = list(bounded_map(slow_square, range(12), workers=2))
    assert [value for value, _ in out] == [x * x for x in range(12)]
    pids = {pid for _, pid in out}
    assert os.getpid() not in pids  # the work happened in worker processes


def test_one_worker_runs_inline() -> None:
    calls: list[int] = []
    initialised: list[int] = []

    def record(x: int) -> tuple[int, int]:  # a closure: it could not be sent to a process
        calls.append(x)
        return x + 1, os.getpid()

    out = list(bounded_map(record, range(5), workers=1,
                           initializer=lambda: initialised.append(os.getpid())))
    assert [v for v, _ in out] == [1, 2, 3, 4, 5]
    assert {pid for _, pid in out} == {os.getpid()}
    assert calls == [0, 1, 2, 3, 4]
    assert initialised == [os.getpid()]


def test_one_worker_is_lazy() -> None:
    pulled = 0

    def source() -> Iterator[int]:
        nonlocal pulled
        for i in itertools.count():
            pulled += 1
            yield i

    it = bounded_map(double, source(), workers=1)
    assert [next(it) for _ in range(3)] == [0, 2, 4]
    assert pulled == 3


def test_two_workers_read_a_bounded_distance_ahead() -> None:
    workers = 2
    pulled = 0

    def source() -> Iterator[int]:
        nonlocal pulled
        for i in range(200):
            pulled += 1
            yield i

    received = 0
    lead = []
    for value in bounded_map(double, source(), workers):
        assert value == 2 * received
        received += 1
        lead.append(pulled - received)
    assert received == 200
    assert max(lead) <= 2 * workers  # never more than 2 x workers items ahead
    assert lead[0] < 200 - 1  # it did not drain the input before the first result


def test_two_workers_on_an_endless_stream() -> None:
    pulled = 0

    def endless() -> Iterator[int]:
        nonlocal pulled
        for i in itertools.count():
            pulled += 1
            yield i

    it = bounded_map(double, endless(), workers=2)
    first = list(itertools.islice(it, 5))
    it.close()  # stops the pool
    assert first == [0, 2, 4, 6, 8]
    assert pulled <= 5 + 2 * 2


def test_worker_errors_propagate() -> None:
    with pytest.raises(ValueError, match="three is not allowed"):
        list(bounded_map(fail_on_three, range(6), workers=2))
    with pytest.raises(ValueError, match="three is not allowed"):
        list(bounded_map(fail_on_three, range(6), workers=1))
