"""One flow run at a time per checkout: DVC state is only ever changed by one run.

Each stage is its own `dvc repro` process, so DVC's own repository lock is released between
stages; two flow runs could otherwise interleave their stages. The lock is an exclusive `flock`
on a file under `.dvc/tmp`, which the kernel releases when the holding process exits, however it
exits: a cancelled or crashed run never leaves the checkout locked.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

LOCK_FILE = Path(".dvc/tmp/gpt1-flow.lock")


class PipelineBusy(RuntimeError):
    """Another flow run held the checkout for longer than the lock timeout."""


def _holder(handle: TextIO) -> str:
    handle.seek(0)
    text = handle.read().strip()
    try:
        holder = json.loads(text)
    except ValueError:
        return "another flow run"
    return f"{holder.get('run', 'a flow run')} (pid {holder.get('pid', '?')})"


@contextmanager
def pipeline_lock(repo_root: Path, timeout: float, run: str,
                  on_wait: Callable[[str], None] = print, poll: float = 1.0) -> Iterator[None]:
    """Hold the checkout's flow lock for the duration of the block; wait up to `timeout`
    seconds for the run holding it (telling `on_wait` once who that is), then raise
    PipelineBusy. `run` names this run to whoever waits next."""
    path = repo_root / LOCK_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+", encoding="utf-8") as handle:
        deadline = time.monotonic() + timeout
        told = False
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = _holder(handle)
                if time.monotonic() >= deadline:
                    raise PipelineBusy(
                        f"{repo_root}: {holder} is still running the pipeline after "
                        f"{timeout:g} s (flows.lock_timeout_seconds); try again when it ends"
                    ) from None
                if not told:
                    on_wait(f"waiting for {holder} to finish with {repo_root} (up to "
                            f"{timeout:g} s, flows.lock_timeout_seconds)")
                    told = True
                time.sleep(poll)
        try:
            handle.truncate(0)
            handle.write(json.dumps({"run": run, "pid": os.getpid()}))
            handle.flush()
            yield
        finally:
            handle.truncate(0)
            handle.flush()
            fcntl.flock(handle, fcntl.LOCK_UN)
