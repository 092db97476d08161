"""What is the user's to fix, told apart from bugs. A stage reports an `InputError` (bad params,
data, file formats, releases; a damaged file a stage wrote), a `MissingInputError`, an `OSError`
of the machine's state (no space, permission denied, a read-only file system) or one about a path
the user gave (`user_paths`: params.yaml, the data root, a release folder) in one line and exits
2, and nothing retries it; any other exception is a bug: it keeps its traceback, exits 1 and may
be retried. A file the program itself needs that is missing is a bug, not bad input."""

from __future__ import annotations

import errno
import os
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from pathlib import Path

# The machine's state, whatever the path: a disk, permissions; the user mends it, retrying can't
MACHINE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS})
# Errors of a path (missing, of the wrong kind): the user's only where the path is
PATH_ERRNOS = frozenset({
    errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.EEXIST, errno.ENOTEMPTY,
    errno.ENAMETOOLONG, errno.ELOOP,
})
USER_FIXABLE_ERRNOS = MACHINE_ERRNOS | PATH_ERRNOS
NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})


LOOP = "a symlink that loops"


def broken_link(path: Path) -> str | None:
    """What `path` is where it is a symlink that cannot be followed (`LOOP`, or a symlink to
    nothing); None where it is not one."""
    if not path.is_symlink() or path.exists():
        return None
    try:
        path.stat()
    except OSError as err:
        if err.errno == errno.ELOOP:
            return LOOP
    return f"a symlink to nothing ({os.readlink(path)})"


class InputError(ValueError):
    """Bad input: params, data, a file's format or a release is not what it must be. The message
    names the file, line or key at fault and says what to do; retrying cannot help."""


class MissingInputError(FileNotFoundError):
    """A file or folder the user gives (or an earlier stage writes) is not there. A
    FileNotFoundError with errno ENOENT, so that `is_input_error` knows it, whose message is
    the one given (naming the path and what to do), with no `[Errno 2]` before it:
    `FileNotFoundError(message)` alone has no errno."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.errno = errno.ENOENT


def not_found(path: Path, hint: str = "") -> OSError | InputError:
    """The error for `path` not being there: where it, or a folder above it, is a symlink that
    cannot be followed, one naming that link (a loop is no missing file); else a
    `MissingInputError`, `hint` after "not found"."""
    for link in (path, *path.parents):
        if (problem := broken_link(link)) is not None:
            error = InputError if problem == LOOP else MissingInputError
            return error(f"{link}: {problem}")
    return MissingInputError(f"{path}: not found{hint}")


class DataFormatError(InputError):
    """A data file does not have the layout its reader expects; the message names the file and
    the line, row or key at fault."""


def _not_utf8(path: Path) -> DataFormatError:
    """The error for a file that does not decode as UTF-8: its first bad byte, by line and by
    offset from the start of the file (a line break never falls inside a UTF-8 character, so
    the lines decode one by one)."""
    offset = 0
    with path.open("rb") as fh:
        for line, raw in enumerate(fh, start=1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as err:
                return DataFormatError(f"{path}:{line}: not UTF-8 text (byte {offset + err.start}"
                                       f": {raw[err.start]:#04x})")
            offset += len(raw)
    return DataFormatError(f"{path}: not UTF-8 text")  # it changed since it failed to decode


@contextmanager
def utf8_errors(path: Path) -> Iterator[None]:
    """Reading `path` as UTF-8 in this block: a byte that does not decode raises a
    DataFormatError naming the line and byte offset of the first one."""
    try:
        yield
    except UnicodeDecodeError:
        raise _not_utf8(path) from None


def _under(path: str | bytes | int | None, roots: Collection[Path]) -> bool:
    """Whether `path` (an OSError's filename) is one of `roots` or lies under one, as written
    or with symbolic links resolved."""
    if not isinstance(path, str | bytes):
        return False
    named = os.fsdecode(path)
    candidates = {Path(os.path.abspath(named)), Path(os.path.realpath(named))}
    bases = {Path(f(root)) for root in roots for f in (os.path.abspath, os.path.realpath)}
    return any(c == base or c.is_relative_to(base) for c in candidates for base in bases)


def is_input_error(err: BaseException, user_paths: Collection[Path] | None = None) -> bool:
    """Whether `err` is the user's to fix: an `InputError` or `MissingInputError` (raised where
    a path the user gives, or a file an earlier stage writes, is opened); an `OSError` of the
    machine's state (`MACHINE_ERRNOS`: no space, permission denied ...); or an `OSError` of a
    path (`PATH_ERRNOS`: missing, a folder where a file should be ...) whose file lies under one
    of `user_paths` (the stage runner's: params.yaml, the data root, a release folder). Anything
    else (a ValueError, a KeyError, a file the program itself needs that is missing) is a bug.
    `user_paths` None: a caller whose paths are all the user's arguments (a command, `--model`,
    `--out`), for which every path error is the user's."""
    if isinstance(err, InputError | MissingInputError):
        return True
    if not isinstance(err, OSError):
        return False
    if err.errno in MACHINE_ERRNOS:
        return True
    if err.errno not in PATH_ERRNOS:
        return False
    return user_paths is None or _under(err.filename, user_paths) or _under(err.filename2,
                                                                            user_paths)


def describe(err: BaseException) -> str:
    """One line for an input error, naming the file where the error carries one."""
    if isinstance(err, OSError) and err.errno in NO_SPACE:
        where = f" writing {err.filename}" if err.filename else ""
        detail = "" if err.strerror == os.strerror(err.errno) else f" ({err.strerror})"
        return f"no space left on device{where}{detail}: free some space and run it again"
    return str(err)
