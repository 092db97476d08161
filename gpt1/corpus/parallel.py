"""Map a function over a stream, in order, with a bounded number of jobs in flight: on worker
processes of this machine, or on a Dask distributed cluster."""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack
from typing import Any, TypeVar

from gpt1.config import ExecutorParams
from gpt1.errors import InputError

T = TypeVar("T")
R = TypeVar("R")
# How long a Dask scheduler named by executor.address gets to answer before the stage gives up
# (Dask's own default is 30 s, retried): a scheduler that is up answers in well under a second
CONNECT_TIMEOUT_SECONDS = 10


def resolve_workers(workers: int) -> int:
    """`workers`, or one per usable CPU core when it is 0."""
    return workers or len(os.sched_getaffinity(0))


def describe(executor: ExecutorParams) -> str:
    """Who runs the batches, in words for a log line."""
    workers = resolve_workers(executor.workers)
    if executor.kind == "dask":
        return (f"the Dask cluster at {executor.address}" if executor.address
                else f"a local Dask cluster of {workers} workers")
    return f"{workers} local processes" if workers > 1 else "this process"


def executor_map(fn: Callable[[T], R], items: Iterable[T], executor: ExecutorParams,
                 worker_setup: Callable[[], None] | None = None) -> Iterator[R]:
    """`map(fn, items)` in order, where `executor` says: `bounded_map` on local processes, or
    `dask_map` on a Dask cluster. `fn` and the items travel by pickle, except with one local
    worker, which is this process. `worker_setup` runs once in each worker process before its
    first job, never in this process."""
    workers = resolve_workers(executor.workers)
    if executor.kind == "dask":
        return dask_map(fn, items, executor.address, workers, worker_setup)
    return bounded_map(fn, items, workers, worker_setup if workers > 1 else None)


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


def check_scheduler(address: str, timeout: float | None = None) -> None:
    """Raise `InputError` naming executor.address unless a Dask scheduler at `address` answers
    Dask's handshake within `timeout` seconds (default `CONNECT_TIMEOUT_SECONDS`). Dask's own
    connect waits for the handshake's reply without a limit: a port that takes connections and
    stays silent, or speaks another protocol, would hold the stage for ever."""
    from distributed.comm import connect
    from distributed.comm.addressing import get_address_host_port
    from distributed.security import Security

    timeout = CONNECT_TIMEOUT_SECONDS if timeout is None else timeout
    try:
        get_address_host_port(address)
    except ValueError as err:  # no port, an unknown scheme
        raise InputError(f"executor.address: {address!r} is not the address of a Dask "
                         f"scheduler ({err}): give tcp://host:port") from None

    async def handshake() -> None:
        comm = await asyncio.wait_for(
            connect(address, timeout=timeout, **Security().get_connection_args("client")),
            timeout)
        await comm.close()

    try:
        asyncio.run(handshake())
    except OSError:  # refused or no such host (Dask retries till its timeout), or silent
        raise InputError(f"executor.address: no Dask scheduler answers at {address} within "
                         f"{timeout:g} s: start one there (`dask scheduler`), fix the "
                         "address, or set address: null for a local cluster") from None
    except MemoryError:  # its first bytes, read as a frame's length: not Dask's protocol
        raise InputError(f"executor.address: {address} answers, but not as a Dask scheduler (the "
                         "dashboard's port, say; the scheduler's is 8786 by default): give the "
                         "scheduler's address") from None


def dask_map(fn: Callable[[T], R], items: Iterable[T], address: str | None, workers: int,
             worker_setup: Callable[[], None] | None = None) -> Iterator[R]:
    """`map(fn, items)` in order on the Dask cluster whose scheduler is at `address`, or on a
    local cluster of `workers` single-threaded processes started for the call (None), with at
    most 2 x the cluster's threads jobs in flight: results are fetched in order, so neither
    the scheduler nor this process holds more than that many, however long `items` is. An
    `address` that is not one, or where no scheduler answers, is bad input naming
    executor.address (`check_scheduler`)."""
    from distributed import Client, LocalCluster, WorkerPlugin  # seconds to import: on demand

    class Initializer(WorkerPlugin):
        """Runs `worker_setup` in every worker, those that join later too."""

        def setup(self, worker: object) -> None:
            worker_setup()

    with ExitStack() as stack:
        if address is None:
            cluster = stack.enter_context(LocalCluster(
                n_workers=workers, threads_per_worker=1, processes=True,
                dashboard_address=None, scheduler_port=0))
            client = stack.enter_context(Client(cluster))
        else:
            check_scheduler(address)
            client = stack.enter_context(Client(address, timeout=CONNECT_TIMEOUT_SECONDS))
        if worker_setup is not None:
            client.register_plugin(Initializer())
        threads = max(1, sum(client.nthreads().values()))
        pending: deque[Any] = deque()
        for item in items:
            pending.append(client.submit(fn, item, pure=False))
            if len(pending) >= 2 * threads:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()

