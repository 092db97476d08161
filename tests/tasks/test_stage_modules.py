"""tasks/: each stage module is a thin driver (read params, record why not where there is nothing
to do, call one library job, write its outputs) that imports no other stage: what two stages
share lives in the library. Only the shell (`tasks/stage.py`) and the paths (`tasks/paths.py`)
are imported by stages; the shell's params guard (`tasks/params_guard.py`) by the shell alone."""

from __future__ import annotations

import ast

import pytest

from tests.conftest import REPO

TASKS = REPO / "tasks"
SHARED = {"stage", "paths"}  # what a stage may import of tasks/
SHELL = {"params_guard"}  # what the shell imports of tasks/, beside the paths: no stage
MAX_CODE_LINES = 60
STAGE_MODULES = sorted(p.stem for p in TASKS.glob("*.py")
                       if p.stem not in SHARED | SHELL | {"__init__"})


def tasks_imports(source: str) -> list[str]:
    """Every module of the `tasks` package that `source` imports, at its top or inside a
    function, absolute or relative (`from . import x` as `tasks.x`)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] == "tasks"]
        elif isinstance(node, ast.ImportFrom):
            module = "tasks" + (f".{node.module}" if node.module else "") if node.level else (
                node.module or "")
            if module == "tasks":  # `from tasks import ablation`: the names are modules
                found += [f"tasks.{a.name}" for a in node.names]
            elif module.split(".")[0] == "tasks":
                found.append(module)
    return found


def code_lines(source: str) -> int:
    """Lines that are neither blank nor a comment, the module's docstring left out."""
    body = ast.parse(source).body
    docstring = set()
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        docstring = set(range(body[0].lineno, body[0].end_lineno + 1))
    return sum(1 for number, line in enumerate(source.splitlines(), 1)
               if number not in docstring and line.strip() and not line.strip().startswith("#"))


def test_the_checks_see_what_they_must() -> None:
    source = '''"""A docstring
of three
lines."""

import tasks.stage
from tasks.paths import RAW_TASKS  # allowed
from tasks import cells, stage


def run() -> None:
    # a comment
    from tasks.ablation import size_key
    from . import transfer
    from .finetune import run
    import tasks.zero_shot as zs
'''
    assert tasks_imports(source) == ["tasks.stage", "tasks.paths", "tasks.cells", "tasks.stage",
                                     "tasks.ablation", "tasks.transfer", "tasks.finetune",
                                     "tasks.zero_shot"]
    assert code_lines(source) == 8
    assert code_lines("x = 1\n\n# note\n  \ny = 2  # two\n") == 2


@pytest.mark.parametrize("name", sorted(p.stem for p in TASKS.glob("*.py")
                                        if p.stem not in SHARED))
def test_a_stage_imports_no_other_stage(name: str) -> None:
    imported = tasks_imports((TASKS / f"{name}.py").read_text(encoding="utf-8"))
    others = sorted({m for m in imported if m not in {f"tasks.{s}" for s in SHARED}})
    assert others == [], (f"tasks/{name}.py imports {others}: move what stages share into "
                          "gpt1/")


@pytest.mark.parametrize("name", STAGE_MODULES)
def test_a_stage_is_a_thin_driver(name: str) -> None:
    lines = code_lines((TASKS / f"{name}.py").read_text(encoding="utf-8"))
    assert lines <= MAX_CODE_LINES, (
        f"tasks/{name}.py: {lines} lines of code (at most {MAX_CODE_LINES}): move its logic into "
        "a job of gpt1/")
