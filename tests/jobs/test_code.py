"""A stage's code fingerprint covers every module its driver runs: checked against the modules
Python itself loads when it imports the driver and the modules its functions import."""

from __future__ import annotations

import ast
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpt1.jobs.code import closure, fingerprint, fingerprint_drivers
from tests.conftest import REPO

DRIVERS = sorted(p.stem for p in (REPO / "tasks").glob("*.py")
                 if 'if __name__ == "__main__":' in p.read_text(encoding="utf-8"))


def _deferred_imports(module: str) -> list[str]:
    """The modules `module`'s functions import when they run (a stage defers the import of its
    heavy job until it knows it has work to do)."""
    tree = ast.parse((REPO / (module.replace(".", "/") + ".py")).read_text(encoding="utf-8"))
    return [node.module for function in ast.walk(tree)
            if isinstance(function, ast.FunctionDef)
            for node in ast.walk(function) if isinstance(node, ast.ImportFrom) and node.module]


def loaded_project_files(module: str) -> set[str]:
    """Project source files (relative paths) that Python loads importing `module` and the
    modules its functions import."""
    modules = [module, *_deferred_imports(module)]
    code = (f"import importlib, json, sys; [importlib.import_module(m) for m in {modules!r}]; "
            "print(json.dumps([getattr(m, '__file__', None) for m in list(sys.modules.values())]))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                         check=True).stdout
    files = set()
    for path in filter(None, json.loads(out)):
        resolved = Path(path).resolve()
        if resolved.is_relative_to(REPO) and resolved.relative_to(REPO).parts[0] in (
                "gpt1", "tasks"):
            files.add(resolved.relative_to(REPO).as_posix())
    return files


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_fingerprint_covers_every_module_its_driver_loads(driver: str) -> None:
    covered = {path.as_posix() for path in closure(f"tasks.{driver}", REPO)}
    assert loaded_project_files(f"tasks.{driver}") <= covered


def test_editing_the_report_does_not_touch_pretrainings_fingerprint() -> None:
    """The reason for a fingerprint per driver rather than one of the whole code."""
    pretrain = set(fingerprint("tasks.pretrain", REPO))
    report = set(fingerprint("tasks.report", REPO))
    assert not any(path.startswith("gpt1/reporting/") for path in pretrain)
    assert "gpt1/reporting/page.py" in report and "gpt1/training/pretrain_loop.py" in pretrain
    assert "gpt1/training/pretrain_loop.py" not in report


def test_an_import_inside_a_function_or_a_block_counts(tmp_path: Path) -> None:
    (tmp_path / "tasks").mkdir()
    (tmp_path / "gpt1" / "deep").mkdir(parents=True)
    (tmp_path / "tasks" / "job.py").write_text(
        "import os\n\ndef run():\n    if True:\n        try:\n            from gpt1.deep.leaf "
        "import value\n        finally:\n            pass\n")
    (tmp_path / "gpt1" / "__init__.py").write_text("")
    (tmp_path / "gpt1" / "deep" / "__init__.py").write_text("")
    (tmp_path / "gpt1" / "deep" / "leaf.py").write_text("import gpt1.other\nvalue = 1\n")
    (tmp_path / "gpt1" / "other.py").write_text("x = [i for i in range(3)]\n")
    assert [p.as_posix() for p in closure("tasks.job", tmp_path)] == [
        "gpt1/__init__.py", "gpt1/deep/__init__.py", "gpt1/deep/leaf.py", "gpt1/other.py",
        "tasks/job.py"]
    fingerprint_drivers(tmp_path, ["job"], tmp_path / "out")
    written = json.loads((tmp_path / "out" / "job.json").read_text())
    assert len(written) == 5
    assert written["gpt1/other.py"] == hashlib.md5(b"x = [i for i in range(3)]\n").hexdigest()
    before = written["gpt1/deep/leaf.py"]
    (tmp_path / "gpt1" / "deep" / "leaf.py").write_text("import gpt1.other\nvalue = 2\n")
    fingerprint_drivers(tmp_path, ["job"], tmp_path / "out")
    assert json.loads((tmp_path / "out" / "job.json").read_text())[
        "gpt1/deep/leaf.py"] != before
