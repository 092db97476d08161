"""tasks/paths.py and dvc.yaml name the same paths: every path a stage writes by a constant of
tasks/paths.py is one dvc.yaml declares (else DVC would neither cache nor track it), and every
out and metric of dvc.yaml has its constant (else a stage writes it from a string of its own)."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from gpt1.config import read_yaml
from tasks import paths
from tests.conftest import REPO

KEY = "${key}"  # a foreach stage's item: here a task of the registry


def _constants() -> dict[str, PurePosixPath]:
    return {name: PurePosixPath(value.as_posix()) for name, value in vars(paths).items()
            if isinstance(value, Path)}


def _declared() -> tuple[set[str], set[str]]:
    """dvc.yaml's outs and metrics, and its deps, as written (a foreach stage's with `${key}`)."""
    stages = read_yaml((REPO / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    written: set[str] = set()
    read: set[str] = set()
    for name, stage in stages.items():
        if "foreach" in stage:
            assert stage["foreach"] == "${tasks}", f"{name}: a foreach this test does not know"
            stage = stage["do"]
        for section, into in (("outs", written), ("metrics", written), ("deps", read)):
            for entry in stage.get(section, []):
                into.add(entry if isinstance(entry, str) else next(iter(entry)))  # {path: opts}
    return written, read


def _named_by(template: str, constant: PurePosixPath) -> bool:
    """`template` (a dvc.yaml path) is `constant`, or one file or folder per task inside it
    (`artifacts/finetune/${key}` is FINETUNE_DIR / task)."""
    path = PurePosixPath(template)
    return path == constant or (KEY in path.name and path.parent == constant)


def test_every_path_constant_is_declared_in_dvc_yaml() -> None:
    written, read = _declared()
    declared = {PurePosixPath(t) for t in written | read if "${" not in t}
    undeclared = [
        f"{name} = {constant}" for name, constant in _constants().items()
        if not any(constant == p or constant.is_relative_to(p) for p in declared)
        and not any(_named_by(t, constant) for t in written | read)]
    assert not undeclared, f"tasks/paths.py names paths dvc.yaml does not declare: {undeclared}"


def test_every_out_and_metric_of_dvc_yaml_has_its_constant() -> None:
    written, _ = _declared()
    constants = _constants().values()
    unnamed = sorted(t for t in written if not any(_named_by(t, c) for c in constants))
    assert not unnamed, f"dvc.yaml outs and metrics without a constant in tasks/paths.py: {unnamed}"


def test_dvc_reads_the_outs_as_this_test_does() -> None:
    """DVC's own view of the outs and metrics: those read here, a foreach stage's once per task
    of the registry (so the checks above see what DVC sees)."""
    from dvc.repo import Repo

    tasks = read_yaml((REPO / "params.yaml").read_text(encoding="utf-8"))["tasks"]
    written, _ = _declared()
    expected = {t.replace(KEY, task) for t in written for task in tasks}
    with Repo(str(REPO)) as repo:
        outs = {out.def_path for stage in repo.index.stages for out in stage.outs}
    assert outs == expected
