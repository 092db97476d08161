"""One flow run at a time per checkout: DVC state is only ever changed by one run.

Each stage is its own `dvc repro` process, so DVC's own repository lock is released between
stages; two flow runs could otherwise interleave their stages. The lock is an exclusive `flock`
on a file under `.dvc/tmp`, which the kernel releases when the holding process exits, however it
exits: a cancelled or crashed run never leaves the checkout locked. A `dvc repro` started by
hand holds DVC's own locks instead: each stage of a flow waits for those (`wait_for_dvc`).
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

import psutil

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


DVC_LOCK = Path(".dvc/tmp/lock")  # DVC's repository lock: zc.lockfile's flock, its PID inside
DVC_RWLOCK = Path(".dvc/tmp/rwlock")  # the paths DVC processes read and write, with their PIDs


def dvc_holders(repo_root: Path) -> list[str]:
    """The other live processes that hold DVC's locks of `repo_root` (a `dvc repro` someone
    started by hand, say), as `PID <n>: <command>`. DVC releases its repository lock while a
    stage's command runs, but keeps the stage's paths in its rwlock: both are looked at."""
    holders = {}
    lock = repo_root / DVC_LOCK
    if lock.is_file():
        with open(lock, "a+", encoding="utf-8") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.flock(handle, fcntl.LOCK_UN)
            except BlockingIOError:
                handle.seek(0)
                pid = handle.read().strip()
                holders[pid] = f"PID {pid or '?'}: a DVC command"
    rwlock = repo_root / DVC_RWLOCK
    if rwlock.is_file():
        try:
            table = json.loads(rwlock.read_text(encoding="utf-8") or "{}")
        except ValueError:  # DVC is rewriting it: ask again at the next poll
            table = {}
        infos = [*table.get("write", {}).values(),
                 *(info for infos in table.get("read", {}).values() for info in infos)]
        for info in infos:
            pid = int(info["pid"])
            if pid != os.getpid() and psutil.pid_exists(pid):
                holders[str(pid)] = f"PID {pid}: {info['cmd']}"
    return sorted(holders.values())


def wait_for_dvc(repo_root: Path, timeout: float, on_wait: Callable[[str], None] = print,
                 poll: float = 1.0) -> None:
    """Return once no other process holds DVC's locks of `repo_root`; wait up to `timeout`
    seconds (telling `on_wait` once who holds them), then raise PipelineBusy naming them."""
    deadline = time.monotonic() + timeout
    told = False
    while holders := dvc_holders(repo_root):
        named = "; ".join(holders)
        if time.monotonic() >= deadline:
            raise PipelineBusy(f"{repo_root}: DVC is busy ({named}) after {timeout:g} s "
                               "(flows.lock_timeout_seconds); try again when it ends")
        if not told:
            on_wait(f"waiting for DVC ({named}) to finish with {repo_root} (up to "
                    f"{timeout:g} s, flows.lock_timeout_seconds)")
            told = True
        time.sleep(poll)
