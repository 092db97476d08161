"""Resumable training state: atomic checkpoints that load without executing code.

A checkpoint is one `torch.save` file holding only tensors, numbers, strings, lists and dicts, so
`torch.load(weights_only=True)` reads it. It is written beside its final name, fsynced and renamed
(`gpt1.atomic.atomic_file`), so a crash at any moment leaves the previous checkpoints intact.
Its sha256 is recorded beside it (`step-<N>.sha256`, as `sha256sum` writes it) and checked before
it is resumed from: `torch.load` does not check the zip's CRCs, and a flipped bit would otherwise
resume silently into other weights.

Runs of different settings keep their checkpoints apart (`CheckpointRuns`: one folder per settings
fingerprint), so changing a knob never deletes another run's work.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import shutil
import signal
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

import torch

from gpt1.atomic import atomic_dir, atomic_file, write_text
from gpt1.model.registry import save_model
from gpt1.model.trunk import Trunk
from gpt1.records import RecordError, RunSettings, read_record

log = logging.getLogger(__name__)

FORMAT = 1
_NAME = re.compile(r"^step-(\d{8})\.pt$")
_SNAPSHOT_NAME = re.compile(r"step-\d{8}")
RUN_FILE = "run.json"  # in each run's folder: the settings its checkpoints were written under
SNAPSHOTS = "snapshots"  # in each run's folder: the models kept at `pretrain.snapshots` steps


def settings_fingerprint(settings: dict[str, Any]) -> str:
    """A digest of a run's settings (JSON-serialisable): equal settings, equal fingerprint."""
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()


class CheckpointStore:
    """Checkpoints of one run in `directory`, named by step; the newest `keep` are kept.

    `fingerprint` names everything that shapes the run's trajectory (model, data, optimiser
    settings): a checkpoint written under another fingerprint is never resumed from. With
    `settings`, the first save also writes them to `run.json`, for people and `CheckpointRuns`.
    """

    def __init__(self, directory: Path, fingerprint: str, keep: int = 2,
                 settings: dict[str, Any] | None = None) -> None:
        if keep < 1:
            raise ValueError(f"keep must be at least 1, got {keep}")
        self.directory, self.fingerprint, self.keep = Path(directory), fingerprint, keep
        self.settings = settings

    def paths(self) -> list[Path]:
        """Checkpoint files, oldest first."""
        if not self.directory.is_dir():
            return []
        found = [p for p in self.directory.iterdir() if _NAME.match(p.name)]
        return sorted(found, key=lambda p: p.name)

    def save(self, step: int, state: dict[str, Any]) -> Path:
        """Write `state` as the checkpoint of `step`, then drop all but the newest `keep`."""
        path = self.directory / f"step-{step:08d}.pt"
        if self.settings is not None and not (self.directory / RUN_FILE).is_file():
            write_text(self.directory / RUN_FILE, json.dumps(self.settings, indent=2) + "\n")
        try:
            # to an open file, not a path: writing through Python, a full disk raises ENOSPC
            # (torch's own file writer reports it as "unexpected pos 447296 vs 447188")
            with atomic_file(path) as tmp, tmp.open("wb") as fh:
                torch.save({"format": FORMAT, "fingerprint": self.fingerprint, "step": step,
                            **state}, fh)
        except (OSError, RuntimeError) as err:
            cause = _os_error(err)
            if cause is None:
                raise
            raise OSError(cause.errno, cause.strerror, str(path)) from None
        write_text(_digest_path(path), f"{_sha256(path)}  {path.name}\n")
        for old in self.paths()[:-self.keep]:
            old.unlink()
            _digest_path(old).unlink(missing_ok=True)
        return path

    def latest(self) -> dict[str, Any] | None:
        """The newest checkpoint that loads and belongs to this run, or None.

        A file whose sha256 is not the one recorded when it was written (changed since, or its
        digest never written), or that does not load (a copy cut short, a disk error), is
        skipped with a warning in favour of the one before it.
        """
        for path in reversed(self.paths()):
            damaged = _damaged(path)
            if damaged is not None:
                log.warning("%s: %s, trying an older one", path, damaged)
                continue
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
        """Remove every checkpoint and snapshot (a fresh run must not leave a stale one)."""
        for path in self.paths():
            path.unlink()
            _digest_path(path).unlink(missing_ok=True)
        shutil.rmtree(self.directory / SNAPSHOTS, ignore_errors=True)

    def save_snapshot(self, step: int, model: Trunk) -> Path:
        """Keep `model` as it is after `step` in `snapshots/step-<8 digits>/` (`save_model`'s
        files, the folder swapped in whole); snapshots are never pruned."""
        path = self.directory / SNAPSHOTS / f"step-{step:08d}"
        with atomic_dir(path) as tmp:
            save_model(model, tmp)
        return path

    def snapshots(self) -> dict[int, Path]:
        """step -> folder of every snapshot kept so far."""
        return snapshot_folders(self.directory / SNAPSHOTS)

    def latest_step(self) -> int:
        """The step of the newest checkpoint file (readable or not), 0 if there is none."""
        paths = self.paths()
        return int(_NAME.match(paths[-1].name).group(1)) if paths else 0


def snapshot_folders(folder: Path) -> dict[int, Path]:
    """step -> `step-<8 digits>` folder of each snapshot in `folder` (`save_snapshot`'s layout), in
    step order; none where the folder does not exist."""
    found = folder.glob("step-*") if folder.is_dir() else []
    return {int(p.name.removeprefix("step-")): p for p in sorted(found)
            if _SNAPSHOT_NAME.fullmatch(p.name)}


def _digest_path(checkpoint: Path) -> Path:
    return checkpoint.with_suffix(".sha256")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _damaged(checkpoint: Path) -> str | None:
    """Why `checkpoint` is not the file that was written (None if it is): its recorded sha256
    is missing (the write stopped before it) or differs from the file's."""
    digest = _digest_path(checkpoint)
    if not digest.is_file():
        return f"no sha256 recorded in {digest.name} (its write was cut short)"
    recorded = digest.read_text(encoding="utf-8").split(maxsplit=1)[0] if digest.stat().st_size \
        else ""
    if recorded != _sha256(checkpoint):
        return (f"its sha256 is not the one {digest.name} recorded when it was written "
                "(damaged since)")
    return None


def _os_error(err: BaseException | None) -> OSError | None:
    """The OSError behind `err`: torch.save's zip writer fails again on closing after a write
    failed, so the ENOSPC may be the context of a RuntimeError."""
    while err is not None and not isinstance(err, OSError):
        err = err.__context__
    return err


def _recorded_settings(run_file: Path) -> dict[str, Any] | None:
    """The settings another run's `run.json` records; None, with a warning, where it is damaged:
    its checkpoints are then a run of unknown settings, never resumed or extended from."""
    try:
        return read_record(run_file, "pretrain", RunSettings)
    except RecordError as err:
        log.warning("%s: damaged (%s): its checkpoints are kept as a run of unknown settings, "
                    "never resumed or extended from", run_file, err.detail)
        return None


@dataclass(frozen=True)
class StoredRun:
    """Another run's checkpoint folder, with the settings its `run.json` records (None for a
    folder without one, or with a damaged one)."""

    store: CheckpointStore
    settings: dict[str, Any] | None


class CheckpointRuns:
    """Checkpoint folders of every setting tried under `root`: `root/<fingerprint[:16]>/`.

    A run with new settings starts its own folder beside the others; the others are kept (and
    reported) unless `keep_other_runs` says how many of the most recent to keep.
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def store(self, settings: dict[str, Any], keep: int) -> CheckpointStore:
        fingerprint = settings_fingerprint(settings)
        return CheckpointStore(self.root / fingerprint[:16], fingerprint, keep, settings)

    def others(self, current: CheckpointStore) -> list[StoredRun]:
        """The other runs' folders that hold checkpoints, least recently written first."""
        if not self.root.is_dir():
            return []
        runs = []
        for folder in self.root.iterdir():
            if not folder.is_dir() or folder == current.directory:
                continue
            run_file = folder / RUN_FILE
            settings = _recorded_settings(run_file) if run_file.is_file() else None
            fingerprint = settings_fingerprint(settings) if settings is not None else ""
            store = CheckpointStore(folder, fingerprint, current.keep, settings)
            if store.paths():
                runs.append(StoredRun(store, settings))
        return sorted(runs, key=lambda run: run.store.paths()[-1].stat().st_mtime)

    def file_loose_checkpoints(self) -> None:
        """Move checkpoints lying directly in `root` (the layout before run folders) into the
        folder of the fingerprint they were written under."""
        for path in CheckpointStore(self.root, "").paths():
            try:
                fingerprint = torch.load(path, map_location="cpu", weights_only=True,
                                         mmap=True)["fingerprint"]
            except Exception as err:  # unreadable: leave it where it is, and say so
                log.warning("%s: unreadable checkpoint left in place (%s)", path, err)
                continue
            folder = self.root / fingerprint[:16]
            folder.mkdir(exist_ok=True)
            path.rename(folder / path.name)
            if _digest_path(path).is_file():
                _digest_path(path).rename(_digest_path(folder / path.name))
            log.warning("%s: moved to %s (checkpoints now live in one folder per run)", path,
                        folder)

    def set_aside(self, current: CheckpointStore, keep_other_runs: int | None) -> None:
        """Report the other runs' checkpoints, kept beside this run's; with `keep_other_runs`,
        delete all but that many of the most recently written (saying which)."""
        self.file_loose_checkpoints()
        others = self.others(current)
        doomed = others[:max(0, len(others) - keep_other_runs)] if keep_other_runs is not None \
            else []
        for run in doomed:
            log.warning("%s: deleting the checkpoints of other settings (last step %d): "
                        "pretrain.keep_other_runs is %d", run.store.directory,
                        run.store.latest_step(), keep_other_runs)
            shutil.rmtree(run.store.directory)
        kept = [run for run in others if run not in doomed]
        if kept:
            size = sum(p.stat().st_size for run in kept for p in run.store.paths())
            log.warning("checkpoints of %d run(s) with other settings are kept, not resumed "
                        "(%.1f MB in %s; this run's are in %s); pretrain.keep_other_runs "
                        "limits them: %s", len(kept), size / 1e6, self.root,
                        current.directory.name,
                        ", ".join(f"{run.store.directory.name} (step {run.store.latest_step()})"
                                  for run in kept))


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
