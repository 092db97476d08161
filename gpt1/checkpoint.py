"""Resumable training state: atomic checkpoints that load without executing code.

A checkpoint is one `torch.save` file holding only tensors, numbers, strings, lists and dicts, so
`torch.load(weights_only=True)` reads it. It is written beside its final name, fsynced and renamed
(`gpt1.atomic.atomic_file`), so a crash at any moment leaves the previous checkpoints intact.
"""

from __future__ import annotations

import logging
import re
import signal
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

import torch

from gpt1.atomic import atomic_file

log = logging.getLogger("gpt1.checkpoint")

FORMAT = 1
_NAME = re.compile(r"^step-(\d{8})\.pt$")


class CheckpointStore:
    """Checkpoints of one run in `directory`, named by step; the newest `keep` are kept.

    `fingerprint` names everything that shapes the run's trajectory (model, data, optimiser
    settings): a checkpoint written under another fingerprint is never resumed from.
    """

    def __init__(self, directory: Path, fingerprint: str, keep: int = 2) -> None:
        if keep < 1:
            raise ValueError(f"keep must be at least 1, got {keep}")
        self.directory, self.fingerprint, self.keep = Path(directory), fingerprint, keep

    def paths(self) -> list[Path]:
        """Checkpoint files, oldest first."""
        if not self.directory.is_dir():
            return []
        found = [p for p in self.directory.iterdir() if _NAME.match(p.name)]
        return sorted(found, key=lambda p: p.name)

    def save(self, step: int, state: dict[str, Any]) -> Path:
        """Write `state` as the checkpoint of `step`, then drop all but the newest `keep`."""
        path = self.directory / f"step-{step:08d}.pt"
        with atomic_file(path) as tmp:
            torch.save({"format": FORMAT, "fingerprint": self.fingerprint, "step": step, **state},
                       tmp)
        for old in self.paths()[:-self.keep]:
            old.unlink()
        return path

    def latest(self) -> dict[str, Any] | None:
        """The newest checkpoint that loads and belongs to this run, or None.

        An unreadable file (a copy cut short, a disk error) is skipped with a warning in favour
        of the one before it.
        """
        for path in reversed(self.paths()):
            try:
                state = torch.load(path, map_location="cpu", weights_only=True)
            except Exception as err:  # any unreadable file: fall back to an older one
                log.warning("%s: unreadable checkpoint, trying an older one (%s)", path, err)
                continue
            if state.get("format") != FORMAT or state.get("fingerprint") != self.fingerprint:
                log.info("%s: written for other settings; not resuming from it", path)
                return None
            return state
        return None

    def clear(self) -> None:
        """Remove every checkpoint (a fresh run must not leave a stale one newest)."""
        for path in self.paths():
            path.unlink()


class StopRequested(Exception):
    """Training stopped early at the user's or the scheduler's request, after a checkpoint."""

    def __init__(self, signum: int, step: int, checkpoint: Path) -> None:
        self.signum, self.step, self.checkpoint = signum, step, checkpoint
        super().__init__(f"{signal.Signals(signum).name} at step {step}: checkpoint {checkpoint}")


class StopSignals:
    """While active, the first SIGTERM or SIGINT only sets `requested` (the signal number), so
    the loop can finish its step and checkpoint; a second one acts as it normally would."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self) -> None:
        self.requested: int | None = None
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.requested = signum
        signal.signal(signum, self._previous[signum])

    def __enter__(self) -> StopSignals:
        try:
            for signum in self.SIGNALS:
                if signal.getsignal(signum) is not signal.SIG_IGN:  # e.g. SIGINT under nohup
                    self._previous[signum] = signal.signal(signum, self._handle)
        except ValueError:  # not the main thread: signals cannot be caught here
            self._restore()
        return self

    def _restore(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._restore()


def rng_state() -> dict[str, Any]:
    """The random-number states training draws from (dropout): CPU and every CUDA device."""
    state: dict[str, Any] = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["cpu"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
