"""Write outputs so that a crash never leaves a half-written file or directory in place."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def atomic_file(dest: Path | str) -> Iterator[Path]:
    """Yield a temporary path beside `dest`; on success fsync it and rename it onto `dest`."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    # mkstemp makes the file 0600: give it the mode a plain write would (or dest's, if it exists)
    mode = dest.stat().st_mode & 0o7777 if dest.exists() else 0o666 & ~_umask()
    tmp.chmod(mode)
    try:
        yield tmp
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, dest)
        _fsync_dir(dest.parent)
    finally:
        tmp.unlink(missing_ok=True)


@contextmanager
def atomic_dir(dest: Path | str) -> Iterator[Path]:
    """Yield an empty temporary directory beside `dest`; on success swap it in for `dest`."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent))
    tmp.chmod(0o777 & ~_umask())  # mkdtemp makes it 0700
    try:
        yield tmp
        old = None
        if dest.exists():
            # renaming a directory onto an empty one is allowed: a unique, empty name
            old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".old", dir=dest.parent))
            os.replace(dest, old)
        os.replace(tmp, dest)
        _fsync_dir(dest.parent)
        if old is not None:
            shutil.rmtree(old)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)


def write_text(dest: Path | str, text: str) -> None:
    """Atomically write a UTF-8 text file."""
    with atomic_file(dest) as tmp:
        tmp.write_text(text, encoding="utf-8")
