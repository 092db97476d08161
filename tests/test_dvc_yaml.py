"""dvc.yaml's stages depend on their code's fingerprint, and read existing params."""

from __future__ import annotations

import pytest

from gpt1.config import load_params, read_yaml
from tests.conftest import REPO

DVC_YAML = read_yaml((REPO / "dvc.yaml").read_text())
STAGES = DVC_YAML["stages"]


def _stage_body(name: str) -> dict:
    stage = STAGES[name]
    return stage["do"] if "foreach" in stage else stage  # a matrix stage's body is itself


@pytest.mark.parametrize("name", sorted(STAGES))
def test_a_stage_depends_on_its_drivers_code_fingerprint_and_on_no_module(name: str) -> None:
    """The code deps are one file, the fingerprint stage `code` writes of the driver the command
    runs (tests/jobs/test_code.py: it covers every module the driver loads)."""
    body = _stage_body(name)
    driver = body["cmd"].split()[2].removeprefix("tasks.")  # python -m tasks.<driver> ...
    deps = [d for d in body["deps"] if isinstance(d, str)]
    assert not [d for d in deps if d.endswith(".py")]
    if name == "code":
        assert deps == ["gpt1", "tasks"] and body["outs"] == ["artifacts/code"]
    else:
        assert [d for d in deps if d.startswith("artifacts/code")] == [
            f"artifacts/code/{driver}.json"]


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


def test_library_sub_packages_re_export_nothing() -> None:
    """A fingerprint holds each package's `__init__.py`: that stays precise only while they are
    empty, as a re-export would make every stage importing one module run its whole
    sub-package."""
    inits = sorted((REPO / "gpt1").glob("*/__init__.py"))
    assert len(inits) >= 6
    assert [p.relative_to(REPO).as_posix() for p in inits if p.read_text().strip()] == []
