"""The data root (`ingest.root`) checked for what DVC cannot hash: DVC tracks the whole folder, and
a FIFO under it makes `dvc status` and `dvc repro` wait forever for a writer, while a symlink
loop fails every dvc command ("Too many levels of symbolic links"). Checked before DVC is handed
the checkout (`gpt1.dag.prepare`: `gpt1 dag`, which `make pipeline` runs before `dvc repro`, and
the flows), by `gpt1 task add` and by the ingest stage, each naming the file."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from gpt1.errors import LOOP, InputError, broken_link

# file types DVC cannot read as data, by the name a message gives them
NOT_FILES = {stat.S_IFIFO: "a FIFO (named pipe)", stat.S_IFSOCK: "a socket",
             stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device"}


def check_data_root(root: Path, key: str = "ingest.root") -> None:
    """Raise InputError, naming `key` and the path, for the first FIFO, socket or device under
    folder `root`, or symlink that loops, points to nothing or leads back to a folder above it."""
    if root.is_dir():
        _check_folder(root, key, {_identity(root)})


def _identity(path: Path) -> tuple[int, int]:
    info = path.stat()
    return info.st_dev, info.st_ino


def _check_folder(folder: Path, key: str, above: set[tuple[int, int]]) -> None:
    with os.scandir(folder) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            path = Path(entry.path)
            try:
                info = entry.stat()  # through symlinks, as DVC reads them
            except OSError:
                problem = broken_link(path)
                if problem is None:
                    raise
                fails = "DVC fails on it: " if problem == LOOP else ""
                raise InputError(f"{key}: {path} is {problem}; {fails}remove it from the data "
                                 "root") from None
            kind = stat.S_IFMT(info.st_mode)
            if kind in NOT_FILES:
                raise InputError(f"{key}: {path} is {NOT_FILES[kind]}, not a file: DVC would "
                                 "wait on it forever hashing the data root; remove it from there")
            if kind == stat.S_IFDIR:
                identity = (info.st_dev, info.st_ino)
                if identity in above:
                    raise InputError(f"{key}: {path} leads back to a folder above it, a loop "
                                     "DVC fails on: remove the link from the data root")
                _check_folder(path, key, above | {identity})
