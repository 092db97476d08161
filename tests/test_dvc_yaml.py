"""dvc.yaml's deps name exactly the code each stage runs, and the stages read existing params."""

from __future__ import annotations

import ast
import json
import subprocess
import sys

import pytest

from gpt1.config import load_params, read_yaml
from tests.conftest import REPO

DVC_YAML = read_yaml((REPO / "dvc.yaml").read_text())
STAGES = DVC_YAML["stages"]


def _stage_body(name: str) -> dict:
    stage = STAGES[name]
    return stage["do"] if "foreach" in stage else stage  # a matrix stage's body is itself


def _deferred_imports(module: str) -> list[str]:
    """The modules `module`'s functions import when they run (a stage defers the import of its
    heavy job until it knows it has work to do)."""
    tree = ast.parse((REPO / (module.replace(".", "/") + ".py")).read_text(encoding="utf-8"))
    return [node.module for function in ast.walk(tree)
            if isinstance(function, ast.FunctionDef)
            for node in ast.walk(function) if isinstance(node, ast.ImportFrom) and node.module]


def _imported_project_files(module: str) -> set[str]:
    """Project source files (relative paths) that importing `module` loads, with the modules
    its functions import."""
    modules = [module, *_deferred_imports(module)]
    code = (
        f"import importlib, json, sys; [importlib.import_module(m) for m in {modules!r}]; "
        "print(json.dumps([getattr(m, '__file__', None) for m in list(sys.modules.values())]))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                         text=True, check=True).stdout
    files = set()
    for path in filter(None, json.loads(out)):
        try:
            rel = __import__("pathlib").Path(path).resolve().relative_to(REPO)
        except ValueError:
            continue
        if rel.parts[0] in ("gpt1", "tasks") and rel.name != "__init__.py":
            files.add(rel.as_posix())
    return files


@pytest.mark.parametrize("name", sorted(STAGES))
def test_code_deps_are_exactly_the_imported_modules(name: str) -> None:
    body = _stage_body(name)
    module = body["cmd"].split()[2]  # python -m tasks.<stage> ...
    declared = {d for d in body["deps"] if isinstance(d, str) and d.endswith(".py")}
    assert declared == _imported_project_files(module), (
        f"dvc.yaml stage {name}: deps on code differ from what {module} imports"
    )


def test_stage_params_exist_in_params_yaml() -> None:
    """Every param key of every stage as DVC resolves it (foreach and matrix stages expanded
    for each item) is a key of params.yaml."""
    from dvc.dependency.param import ParamsDependency
    from dvc.repo import Repo

    params = load_params(REPO / "params.yaml").model_dump()
    with Repo(str(REPO)) as repo:
        declared = [(stage.addressing, dotted) for stage in repo.index.stages
                    for dep in stage.deps if isinstance(dep, ParamsDependency)
                    for dotted in dep.params]
    assert any("@" in stage for stage, _ in declared)  # the expanded stages are among them
    for stage, dotted in declared:
        node = params
        for key in dotted.split("."):
            assert key in node, f"dvc.yaml stage {stage}: param {dotted} not in params"
            node = node[key]


def test_every_registry_task_has_a_finetune_stage() -> None:
    from dvc.repo import Repo

    with Repo(str(REPO)) as repo:
        names = {stage.addressing for stage in repo.index.stages}
    tasks = load_params(REPO / "params.yaml").tasks
    assert {f"finetune@{task}" for task in tasks} <= names


def test_library_sub_packages_re_export_nothing() -> None:
    """The deps above leave `__init__.py` files out: that holds only while they are empty, as a
    re-export would make every stage importing one module depend on its whole sub-package."""
    inits = sorted((REPO / "gpt1").glob("*/__init__.py"))
    assert len(inits) >= 6
    assert [p.relative_to(REPO).as_posix() for p in inits if p.read_text().strip()] == []
