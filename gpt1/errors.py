"""What is the user's to fix, told apart from bugs. A stage reports an `InputError` (bad params,
data, file formats, releases) or an `OSError` of the machine's state (no such file, no space,
permission denied ...) in one line and exits 2, and nothing retries it; any other exception is
a bug: it keeps its traceback, exits 1 and may be retried."""

from __future__ import annotations

import errno
import os

# Errors of the file system a user mends (a path, a disk, permissions), not the code
USER_FIXABLE_ERRNOS = frozenset({
    errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.EEXIST, errno.ENOTEMPTY,
    errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.ENAMETOOLONG,
    errno.ELOOP,
})
NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})


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


def is_input_error(err: BaseException) -> bool:
    """Whether `err` is the user's to fix: an `InputError`, or an `OSError` of the file system's
    state (`USER_FIXABLE_ERRNOS`). A ValueError, KeyError or other OSError is a bug."""
    if isinstance(err, InputError):
        return True
    return isinstance(err, OSError) and err.errno in USER_FIXABLE_ERRNOS


def describe(err: BaseException) -> str:
    """One line for an input error, naming the file where the error carries one."""
    if isinstance(err, OSError) and err.errno in NO_SPACE:
        where = f" writing {err.filename}" if err.filename else ""
        detail = "" if err.strerror == os.strerror(err.errno) else f" ({err.strerror})"
        return (f"no space left on device{where}{detail}: free some space and run the stage "
                "again")
    return str(err)
