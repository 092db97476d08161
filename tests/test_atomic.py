"""gpt1.atomic: outputs appear whole or not at all, and no temporary file is left behind."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from gpt1.atomic import atomic_dir, atomic_file, write_text


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
