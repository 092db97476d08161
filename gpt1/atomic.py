"""Write outputs so that a crash never leaves a half-written file or directory in place.

Temporary names carry the writer's PID (`.{name}.{pid}.{random}.tmp`), so that the next writer of
the same output can tell what a killed one left behind from what a live one is writing; and so
that `sweep_stale` can clear a whole folder of them where no writer of that output runs again (a
stage DVC restores from its run cache instead of running it).
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from gpt1.errors import InputError

log = logging.getLogger(__name__)

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _load_renameat2() -> Callable[..., int] | None:
    if sys.platform != "linux":
        return None
    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)  # glibc >= 2.28
    if renameat2 is not None:
        renameat2.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                              ctypes.c_uint)
    return renameat2


_renameat2 = _load_renameat2()


def _exchange(a: Path, b: Path) -> bool:
    """Swap two existing paths in one syscall; False where the OS or filesystem cannot."""
    if _renameat2 is None:
        return False
    if _renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS):  # a filesystem or kernel without RENAME_EXCHANGE
        return False
    raise OSError(code, os.strerror(code), str(a), None, str(b))


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


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


def _is_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        pass
    return True


# any writer's temporary: `.{name}.{pid}.{random}.tmp`, or `.old` for an output moved aside
_TEMPORARY = re.compile(r"\.(?P<name>.+)\.\d{1,9}\.[^.]+\.(?:tmp|old)")


def _temp_prefix(dest: Path) -> str:
    return f".{dest.name}.{os.getpid()}."


def _clean_stale(dest: Path) -> None:
    """Undo what killed writers of `dest` left: put back the old `dest` a two-rename swap had
    moved aside (when `dest` is missing), then remove their temporaries."""
    # at most 9 digits: a PID, and a number os.kill takes
    pattern = re.compile(rf"\.{re.escape(dest.name)}\.(\d{{1,9}})\.[^.]+\.(?:tmp|old)")
    stale = {dest.parent / name: int(m[1]) for name in os.listdir(dest.parent)
             if (m := pattern.fullmatch(name)) and not _is_alive(int(m[1]))}
    olds = sorted(entry for entry in stale if entry.suffix == ".old")
    if olds and not os.path.lexists(dest):
        old = olds[0]  # at most one: every run restores before it swaps
        pid = stale.pop(old)
        try:
            os.replace(old, dest)
        except FileNotFoundError:  # another process restored it first
            pass
        else:
            log.info("%s: restored from %s, moved aside by process %d before it was killed",
                     dest, old.name, pid)
    for entry, pid in stale.items():
        with suppress(FileNotFoundError):  # another writer cleaned it first
            _remove(entry)
            log.info("%s: removed %s, left by process %d, which has exited",
                     dest.parent, entry.name, pid)


def sweep_stale(folder: Path | str) -> None:
    """Undo what killed writers left in `folder`, whatever output they were writing: as the
    next writer of each output would (an output moved aside put back, temporaries removed), for
    the outputs no writer may write again. A temporary of a live process is left alone."""
    folder = Path(folder)
    if not folder.is_dir():
        return
    names = {m["name"] for entry in os.listdir(folder) if (m := _TEMPORARY.fullmatch(entry))}
    for name in sorted(names - {".", ".."}):
        _clean_stale(folder / name)


def _swap_in(new: Path, dest: Path) -> Path | None:
    """Put `new` at `dest`; returns where the old `dest` now is (None if there was none)."""
    if not os.path.lexists(dest):
        os.replace(new, dest)
        return None
    if _exchange(new, dest):
        return new
    # no atomic exchange here: a kill between these renames leaves `dest` missing, and the next
    # atomic_dir/atomic_file of `dest` puts the old one back (_clean_stale)
    old = new.with_suffix(".old")
    os.replace(dest, old)
    try:
        os.replace(new, dest)
    except OSError:
        os.replace(old, dest)
        raise
    return old


def check_replaceable(dest: Path, names: Collection[str], force: bool = False) -> None:
    """Refuse to replace `dest` with a directory unless it is absent, or a directory holding only
    files named in `names` (what the writer itself writes); `force` lifts the second rule."""
    if os.path.lexists(dest) and not dest.is_dir():
        raise InputError(f"{dest}: exists and is not a directory")
    if force or not dest.is_dir():
        return
    foreign = sorted(entry.name for entry in dest.iterdir()
                     if entry.name not in names or not entry.is_file())
    if foreign:
        more = f" and {len(foreign) - 3} more" if len(foreign) > 3 else ""
        raise InputError(f"{dest}: holds {', '.join(foreign[:3])}{more}, which this command does "
                         "not write; refusing to replace it (--force replaces it)")


@contextmanager
def _naming(dest: Path) -> Iterator[None]:
    """An OSError that names no file (a write that found the disk full) names `dest`; one
    with a message of its own (`gpt1.errors.MissingInputError`: no strerror) is left as it is."""
    try:
        yield
    except OSError as err:
        if err.filename is not None or err.errno is None or err.strerror is None:
            raise
        raise OSError(err.errno, err.strerror, str(dest)) from err


@contextmanager
def atomic_file(dest: Path | str) -> Iterator[Path]:
    """Yield a temporary path beside `dest`; on success fsync it and rename it onto `dest`."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    _clean_stale(dest)
    fd, tmp_name = tempfile.mkstemp(prefix=_temp_prefix(dest), suffix=".tmp", dir=dest.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    # mkstemp makes the file 0600: give it the mode a plain write would (or dest's, if it exists)
    mode = dest.stat().st_mode & 0o7777 if dest.exists() else 0o666 & ~_umask()
    tmp.chmod(mode)
    try:
        with _naming(dest):
            yield tmp
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, dest)
        _fsync_dir(dest.parent)
    finally:
        tmp.unlink(missing_ok=True)


@contextmanager
def atomic_dir(dest: Path | str) -> Iterator[Path]:
    """Yield an empty temporary directory beside `dest`; on success swap it in for `dest`.

    The swap is one `renameat2(RENAME_EXCHANGE)` on Linux, two renames elsewhere; the old `dest`
    is removed after it.
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    _clean_stale(dest)
    tmp = Path(tempfile.mkdtemp(prefix=_temp_prefix(dest), suffix=".tmp", dir=dest.parent))
    tmp.chmod(0o777 & ~_umask())  # mkdtemp makes it 0700
    try:
        with _naming(dest):
            yield tmp
        old = _swap_in(tmp, dest)
        _fsync_dir(dest.parent)
        if old is not None:
            _remove(old)
    finally:
        if os.path.lexists(tmp):
            _remove(tmp)


def write_text(dest: Path | str, text: str) -> None:
    """Atomically write a UTF-8 text file."""
    with atomic_file(dest) as tmp:
        tmp.write_text(text, encoding="utf-8")
