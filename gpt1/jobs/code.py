"""Stage `code`'s job: the code each stage runs, fingerprinted. A stage's fingerprint lists every
module of the project its driver imports, at its top or inside a function, followed through
each module it reaches, with each file's md5; dvc.yaml makes the stage depend on that one file
rather than on each module, so DVC re-runs a stage exactly when its code changed, and records
one dependency for it instead of thirty."""

from __future__ import annotations

import ast
import hashlib
import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from gpt1.atomic import atomic_dir

PACKAGES = ("gpt1", "tasks")  # the project's code; any other import is a library's


@cache
def _file(module: str, root: Path) -> Path | None:
    """The source file of `module` under `root` (a package's `__init__.py`), None if none."""
    base = root.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement of `body` and of the blocks inside them (an import is a statement: the
    expressions, most of a module, need no look)."""
    for node in body:
        yield node
        for block in ("body", "orelse", "finalbody", "handlers", "cases"):
            inner = getattr(node, block, None)
            if isinstance(inner, list):
                yield from _statements(inner)


@cache
def _imported(path: Path) -> frozenset[str]:
    """The project modules `path` names in its imports, anywhere in it; `from a import b` names
    `a` and, where `b` is a module, `a.b`."""
    named = set()
    for node in _statements(ast.parse(path.read_text(encoding="utf-8"), str(path)).body):
        if isinstance(node, ast.Import):
            named |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            named |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
    return frozenset(name for name in named if name.split(".")[0] in PACKAGES)


def closure(module: str, root: Path) -> list[Path]:
    """Every project source file (relative to `root`) that running `module` may load: its own,
    those of the modules it imports and theirs in turn, with each package's `__init__.py`."""
    seen: set[Path] = set()
    pending = [module]
    while pending:
        name = pending.pop()
        parts = name.split(".")
        for depth in range(1, len(parts) + 1):  # a module's packages run their __init__ first
            path = _file(".".join(parts[:depth]), root)
            if path is None or path in seen:
                continue
            seen.add(path)
            pending.extend(_imported(path))
    return sorted(path.relative_to(root) for path in seen)


def fingerprint(module: str, root: Path) -> dict[str, str]:
    """`closure(module)`'s files (posix paths) -> the md5 of each one's bytes."""
    return {path.as_posix(): hashlib.md5((root / path).read_bytes()).hexdigest()
            for path in closure(module, root)}


def fingerprint_drivers(root: Path, drivers: list[str], out: Path) -> None:
    """Folder `out` (replaced atomically): `<driver>.json`, the fingerprint of `tasks.<driver>`,
    for each of `drivers`."""
    with atomic_dir(out) as tmp:
        for driver in drivers:
            text = json.dumps(fingerprint(f"tasks.{driver}", root), indent=1, sort_keys=True)
            (tmp / f"{driver}.json").write_text(text + "\n", encoding="utf-8")
