"""gpt1.atomic: outputs appear whole or not at all, and no temporary file is left behind."""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import re
import signal
import stat
import subprocess
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from gpt1 import atomic
from gpt1.atomic import atomic_dir, atomic_file, check_replaceable, write_text
from tests.conftest import skip_outside_ci

GONE = 4_194_305  # above Linux's PID_MAX_LIMIT (2**22): never a live process
Writer = Callable[[Path], AbstractContextManager[Path]]


class Boom(RuntimeError):
    pass


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_atomic_file_writes_and_leaves_only_the_file(tmp_path: Path) -> None:
    dest = tmp_path / "out.txt"
    with atomic_file(dest) as tmp:
        assert tmp.parent == dest.parent and tmp != dest
        tmp.write_text("new")
        assert not dest.exists()  # nothing is visible before the block succeeds
    assert dest.read_text() == "new"
    assert _names(tmp_path) == ["out.txt"]


def test_atomic_file_failure_keeps_old_file_and_removes_temp(tmp_path: Path) -> None:
    dest = tmp_path / "out.txt"
    dest.write_text("old")
    with pytest.raises(Boom), atomic_file(dest) as tmp:
        tmp.write_text("half-writt")
        raise Boom
    assert dest.read_text() == "old"
    assert _names(tmp_path) == ["out.txt"]


def test_atomic_file_failure_creates_nothing_when_absent(tmp_path: Path) -> None:
    dest = tmp_path / "sub" / "out.txt"  # parent is created on the way
    with pytest.raises(Boom), atomic_file(dest) as tmp:
        tmp.write_text("x")
        raise Boom
    assert not dest.exists()
    assert _names(tmp_path / "sub") == []


def test_atomic_dir_replaces_whole_directory(tmp_path: Path) -> None:
    dest = tmp_path / "outdir"
    dest.mkdir()
    (dest / "stale.txt").write_text("stale")
    with atomic_dir(dest) as tmp:
        assert tmp.is_dir() and list(tmp.iterdir()) == []
        (tmp / "a.txt").write_text("a")
        (tmp / "nested").mkdir()
        (tmp / "nested" / "b.txt").write_text("b")
        assert (dest / "stale.txt").read_text() == "stale"  # old one still in place meanwhile
    assert _names(dest) == ["a.txt", "nested"]
    assert (dest / "nested" / "b.txt").read_text() == "b"
    assert _names(tmp_path) == ["outdir"]  # no .tmp and no .old-<pid> left


def test_atomic_dir_failure_keeps_old_directory_and_removes_temp(tmp_path: Path) -> None:
    dest = tmp_path / "outdir"
    dest.mkdir()
    (dest / "keep.txt").write_text("keep")
    with pytest.raises(Boom), atomic_dir(dest) as tmp:
        (tmp / "partial.txt").write_text("partial")
        (tmp / "deep").mkdir()
        (tmp / "deep" / "x").write_text("x")
        raise Boom
    assert _names(dest) == ["keep.txt"]
    assert (dest / "keep.txt").read_text() == "keep"
    assert _names(tmp_path) == ["outdir"]


def test_atomic_dir_failure_creates_nothing_when_absent(tmp_path: Path) -> None:
    with pytest.raises(Boom), atomic_dir(tmp_path / "never") as tmp:
        (tmp / "f").write_text("f")
        raise Boom
    assert _names(tmp_path) == []


def test_write_text_is_utf8(tmp_path: Path) -> None:
    dest = tmp_path / "a" / "b.md"
    write_text(dest, "naïve — ✓\n")
    assert dest.read_bytes() == "naïve — ✓\n".encode()
    write_text(dest, "second")
    assert dest.read_text(encoding="utf-8") == "second"
    assert _names(dest.parent) == ["b.md"]


def test_file_mode_is_that_of_a_normal_write(tmp_path: Path) -> None:
    """BUG (gpt1/atomic.py, atomic_file, line 26): the temporary file comes from
    tempfile.mkstemp, which creates it with mode 0600, and os.replace carries that mode onto
    `dest`. So every atomic output is 0600 whatever the umask, and rewriting an existing file
    changes its mode: `gpt1 preset tiny` turns a 0644 params.yaml into 0600. (atomic_dir has
    the same flaw: tempfile.mkdtemp makes every output directory 0700.)"""
    umask = os.umask(0)
    os.umask(umask)
    fresh = tmp_path / "fresh.txt"
    write_text(fresh, "x")
    existing = tmp_path / "existing.txt"
    existing.write_text("old")
    os.chmod(existing, 0o644)
    write_text(existing, "new")
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (fresh, existing)}
    expected = {"fresh.txt": 0o666 & ~umask, "existing.txt": 0o644}
    assert modes == expected, (
        f"atomic_file modes {({k: oct(v) for k, v in modes.items()})}, "
        f"expected {({k: oct(v) for k, v in expected.items()})} (umask {oct(umask)})")


def _old_output(tmp_path: Path) -> Path:
    dest = tmp_path / "out"
    dest.mkdir()
    (dest / "v.txt").write_text("old")
    return dest


def _skip_without_exchange(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    supported = atomic._exchange(tmp_path / "a", tmp_path / "b")
    (tmp_path / "a").rmdir()
    (tmp_path / "b").rmdir()
    if not supported:  # CI's Linux has it
        skip_outside_ci("no renameat2(RENAME_EXCHANGE) on this OS or filesystem")


KILLED_WRITER = """
import os, signal, sys
from pathlib import Path
import gpt1.atomic as atomic

def die():
    os.kill(os.getpid(), signal.SIGKILL)

{patch}
with atomic.atomic_dir(Path(sys.argv[1])) as tmp:
    (tmp / "v.txt").write_text("new")
"""


def _write_and_get_killed(dest: Path, patch: str) -> None:
    """atomic_dir writes "new" to `dest` in a subprocess, which `patch` SIGKILLs on the way."""
    proc = subprocess.run([sys.executable, "-c", KILLED_WRITER.format(patch=patch), str(dest)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr


def _fail_to_rewrite(dest: Path) -> None:
    """The next run of the stage, which recovers what the killed one left, then fails."""
    with pytest.raises(Boom), atomic_dir(dest):
        raise Boom


def test_killed_right_after_the_exchange_leaves_the_new_output(tmp_path: Path) -> None:
    _skip_without_exchange(tmp_path)
    dest = _old_output(tmp_path)
    _write_and_get_killed(dest, "real = atomic._exchange\n"
                                "atomic._exchange = lambda a, b: real(a, b) and die()")
    assert (dest / "v.txt").read_text() == "new"
    assert len(_names(tmp_path)) == 2  # and the old output, at the killed writer's temp name
    _fail_to_rewrite(dest)
    assert _names(tmp_path) == ["out"] and (dest / "v.txt").read_text() == "new"


def test_killed_just_before_the_exchange_leaves_the_old_output(tmp_path: Path) -> None:
    _skip_without_exchange(tmp_path)
    dest = _old_output(tmp_path)
    _write_and_get_killed(dest, "atomic._exchange = lambda a, b: die()")
    assert (dest / "v.txt").read_text() == "old"
    _fail_to_rewrite(dest)
    assert _names(tmp_path) == ["out"] and (dest / "v.txt").read_text() == "old"


def test_killed_between_the_two_renames_the_next_run_puts_the_old_output_back(
        tmp_path: Path) -> None:
    dest = _old_output(tmp_path)
    _write_and_get_killed(dest, """
atomic._exchange = lambda a, b: False  # a system without RENAME_EXCHANGE
real_replace = os.replace
def replace(src, dst):
    real_replace(src, dst)
    if str(dst).endswith(".old"):
        die()
os.replace = replace
""")
    assert not dest.exists()  # the window the exchange closes
    _fail_to_rewrite(dest)
    assert _names(tmp_path) == ["out"] and (dest / "v.txt").read_text() == "old"


def test_two_renames_where_the_exchange_is_unsupported(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(atomic, "_exchange", lambda a, b: False)
    dest = _old_output(tmp_path)
    with atomic_dir(dest) as tmp:
        (tmp / "v.txt").write_text("new")
    assert _names(tmp_path) == ["out"] and (dest / "v.txt").read_text() == "new"
    _fail_to_rewrite(dest)
    assert _names(tmp_path) == ["out"] and (dest / "v.txt").read_text() == "new"


@pytest.mark.parametrize("code", [errno.EINVAL, errno.ENOSYS, errno.EACCES],
                         ids=errno.errorcode.get)
def test_exchange_falls_back_only_where_unsupported(tmp_path: Path, code: int,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    def failing_renameat2(*args: object) -> int:
        ctypes.set_errno(code)
        return -1

    monkeypatch.setattr(atomic, "_renameat2", failing_renameat2)
    if code == errno.EACCES:
        with pytest.raises(PermissionError):
            atomic._exchange(tmp_path / "a", tmp_path / "b")
    else:
        assert atomic._exchange(tmp_path / "a", tmp_path / "b") is False
    monkeypatch.setattr(atomic, "_renameat2", None)  # not Linux, or a libc without it
    assert atomic._exchange(tmp_path / "a", tmp_path / "b") is False


def test_temporaries_carry_the_writers_pid(tmp_path: Path) -> None:
    with atomic_dir(tmp_path / "d") as d, atomic_file(tmp_path / "f") as f:
        assert re.fullmatch(rf"\.d\.{os.getpid()}\.\w+\.tmp", d.name), d.name
        assert re.fullmatch(rf"\.f\.{os.getpid()}\.\w+\.tmp", f.name), f.name


@pytest.mark.parametrize("writer", [atomic_dir, atomic_file])
def test_temporaries_of_exited_writers_are_removed(tmp_path: Path,
                                                   caplog: pytest.LogCaptureFixture,
                                                   writer: Writer) -> None:
    dest = tmp_path / "out"
    with writer(dest):
        pass
    orphans = [tmp_path / f".out.{GONE}.k3j2h1g0.tmp", tmp_path / f".out.{GONE}.a1b2c3d4.old"]
    orphans[0].mkdir()
    (orphans[0] / "half-written").write_text("x")
    orphans[1].write_text("moved aside")
    kept = [tmp_path / f".out.{os.getpid()}.livewrit.tmp",  # a live writer's
            tmp_path / f".other.{GONE}.k3j2h1g0.tmp",  # another output's
            tmp_path / ".out.k3j2h1g0.tmp"]  # no PID: nothing to tell who left it
    for path in kept:
        path.write_text("")
    with caplog.at_level(logging.INFO, logger="gpt1.atomic"), writer(dest):
        pass
    assert _names(tmp_path) == sorted(["out", *(p.name for p in kept)])
    for orphan in orphans:
        assert f"removed {orphan.name}, left by process {GONE}" in caplog.text


def test_check_replaceable(tmp_path: Path) -> None:
    names = ("config.json", "model.safetensors")
    check_replaceable(tmp_path / "absent", names)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    check_replaceable(model, names)  # what the writer writes itself
    (model / "notes.txt").write_text("mine")
    (model / "runs").mkdir()
    with pytest.raises(ValueError, match=r"model: holds notes\.txt, runs, which this command "
                                         r"does not write; .*--force"):
        check_replaceable(model, names)
    check_replaceable(model, names, force=True)
    (tmp_path / "file").write_text("")
    for force in (False, True):
        with pytest.raises(ValueError, match=r"file: exists and is not a directory"):
            check_replaceable(tmp_path / "file", names, force)


@pytest.mark.parametrize("writer", [atomic_dir, atomic_file])
def test_a_write_error_without_a_file_names_the_output(tmp_path: Path, writer: object) -> None:
    """A full disk fails a write with ENOSPC and no file name: the error names the output."""
    dest = tmp_path / "out"
    with pytest.raises(OSError) as info, writer(dest):
        raise OSError(errno.ENOSPC, "No space left on device")
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(dest)
    assert os.listdir(tmp_path) == []
