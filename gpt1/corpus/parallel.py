"""Map a function over a stream on worker processes with a bounded number of jobs in flight."""

from __future__ import annotations

import multiprocessing as mp
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def resolve_workers(workers: int) -> int:
    """`workers`, or one per usable CPU core when it is 0."""
    return workers or len(os.sched_getaffinity(0))


def bounded_map(fn: Callable[[T], R], items: Iterable[T], workers: int,
                initializer: Callable[[], None] | None = None) -> Iterator[R]:
    """`map(fn, items)` in order, on `workers` processes, reading at most 2 x workers items ahead.

    Unlike `Pool.imap`, whose feeder thread drains the whole input at once, memory stays bounded
    however long `items` is. With one worker it runs in this process.
    """
    if workers <= 1:
        if initializer is not None:
            initializer()
        yield from map(fn, items)
        return
    ctx = mp.get_context("spawn")  # fork + torch/tokenizers threads can deadlock
    with ctx.Pool(workers, initializer=initializer) as pool:
        pending: deque = deque()
        for item in items:
            pending.append(pool.apply_async(fn, (item,)))
            if len(pending) >= 2 * workers:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()
