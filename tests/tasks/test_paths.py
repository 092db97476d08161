"""tasks/paths.py and dvc.yaml name the same paths: every path a stage writes by a constant of
tasks/paths.py is one dvc.yaml declares (else DVC would neither cache nor track it), and every
out and metric of dvc.yaml has its constant (else a stage writes it from a string of its own)."""

from __future__ import annotations

import functools
import itertools
from pathlib import Path, PurePosixPath

from gpt1.config import read_yaml
from tasks import paths
from tests.conftest import REPO

# what dvc.yaml interpolates: params.yaml and the stage lists of dag.yaml (its `vars`)
PARAMS = {**read_yaml((REPO / "params.yaml").read_text(encoding="utf-8")),
          **read_yaml((REPO / "dag.yaml").read_text(encoding="utf-8"))}


def _constants() -> dict[str, PurePosixPath]:
    return {name: PurePosixPath(value.as_posix()) for name, value in vars(paths).items()
            if isinstance(value, Path)}


def _lookup(reference: str) -> object:
    """The value a `${dotted.key}` reference names in `PARAMS`."""
    node = PARAMS
    for key in reference.removeprefix("${").removesuffix("}").split("."):
        node = node[key]
    return node


def _values(reference: str) -> list[str]:
    """What a foreach or matrix reference (`${dag.transfer}`) iterates over: a mapping's keys,
    or a list's items."""
    return list(_lookup(reference))  # type: ignore[call-overload]


def _items(stage: dict) -> tuple[dict, list[dict[str, str]]]:
    """A stage's body and, per stage DVC makes of it, what its `${...}` placeholders stand for:
    a foreach stage's `${item}` (over a list; `${key}` over a mapping), a matrix stage's
    `${item.<name>}`."""
    if "foreach" in stage:
        iterated = _values(stage["foreach"])
        mapping = isinstance(_lookup(stage["foreach"]), dict)
        return stage["do"], [{"${key}" if mapping else "${item}": key} for key in iterated]
    if "matrix" in stage:
        names = list(stage["matrix"])
        combos = itertools.product(*(_values(stage["matrix"][n]) for n in names))
        return stage, [{f"${{item.{n}}}": v for n, v in zip(names, combo, strict=True)}
                       for combo in combos]
    return stage, [{}]


def _declared() -> tuple[set[str], set[str], set[str]]:
    """dvc.yaml's outs, metrics and plots, and its deps, as written (with their placeholders);
    and the outs, metrics and plots of every stage DVC makes of them."""
    stages = read_yaml((REPO / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    written: set[str] = set()
    read: set[str] = set()
    expanded: set[str] = set()
    for stage in stages.values():
        body, substitutions = _items(stage)
        for section, into in (("outs", written), ("metrics", written), ("plots", written),
                              ("deps", read)):
            for entry in body.get(section, []):
                path = entry if isinstance(entry, str) else next(iter(entry))  # {path: opts}
                into.add(path)
                if section != "deps":
                    for substitution in substitutions:
                        expanded.add(functools.reduce(lambda p, kv: p.replace(*kv),
                                                      substitution.items(), path))
    return written, read, expanded


def _named_by(template: str, constant: PurePosixPath) -> bool:
    """`template` (a dvc.yaml path) is `constant`, or files or folders per stage item inside it
    (`artifacts/finetune/${key}` is FINETUNE_DIR / task, `metrics/ablation/${item.variant}/
    ${item.task}.json` is ABLATION_METRICS / variant / f"{task}.json")."""
    parts, base = PurePosixPath(template).parts, constant.parts
    return parts[:len(base)] == base and all("${" in part for part in parts[len(base):])


def _is_declared(constant: PurePosixPath, written: set[str], read: set[str]) -> bool:
    declared = {PurePosixPath(t) for t in written | read if "${" not in t}
    return (any(constant == p or constant.is_relative_to(p) for p in declared)
            or any(_named_by(t, constant) for t in written | read))


# the stage records' folder: tasks.stage.record_path names each file in it by the stage's
# address, and test_every_stage_declares_its_record checks them one by one
RECORDS = PurePosixPath(paths.STAGE_RECORDS.as_posix())


def test_every_path_constant_is_declared_in_dvc_yaml() -> None:
    written, read, _ = _declared()
    state = {PurePosixPath(p.as_posix()) for p in paths.STAGE_STATE}
    undeclared = [f"{name} = {constant}" for name, constant in _constants().items()
                  if constant not in state | {RECORDS}
                  and not _is_declared(constant, written, read)]
    assert not undeclared, f"tasks/paths.py names paths dvc.yaml does not declare: {undeclared}"


def test_the_stages_own_state_is_not_declared_in_dvc_yaml() -> None:
    """Checkpoints as a DVC out would be deleted before a run unless persisted, and a persisted
    uncached out leaves a clone that pulled the finished model out of date."""
    written, read, _ = _declared()
    assert paths.STAGE_STATE
    for constant in paths.STAGE_STATE:
        assert not _is_declared(PurePosixPath(constant.as_posix()), written, read), constant


def test_every_out_and_metric_of_dvc_yaml_has_its_constant() -> None:
    written, _, _ = _declared()
    constants = _constants().values()
    unnamed = sorted(t for t in written if not any(_named_by(t, c) for c in constants)
                     and not PurePosixPath(t).is_relative_to(RECORDS))
    assert not unnamed, f"dvc.yaml outs and metrics without a constant in tasks/paths.py: {unnamed}"


def test_dvc_reads_the_outs_as_this_test_does() -> None:
    """DVC's own view of the outs and metrics: those read here, a foreach or matrix stage's once
    per item of params.yaml (so the checks above see what DVC sees)."""
    from dvc.repo import Repo

    _, _, expected = _declared()
    with Repo(str(REPO)) as repo:
        outs = {out.def_path for stage in repo.index.stages for out in stage.outs}
    assert outs == expected


def test_every_stage_declares_its_record() -> None:
    """Each stage DVC makes (a foreach or matrix stage's once per item) declares, uncached, the
    record tasks.stage writes for it, and no other file under metrics/stages; but the report,
    which reads all of metrics/: its record is an output beside its pages, cached with them."""
    from dvc.repo import Repo

    from tasks.stage import record_path

    with Repo(str(REPO)) as repo:
        for stage in repo.index.stages:
            expected = record_path(stage.addressing).as_posix()
            records = [out for out in stage.outs if out.def_path == expected
                       or PurePosixPath(out.def_path).is_relative_to(RECORDS)]
            assert [out.def_path for out in records] == [expected], stage.addressing
            if stage.addressing == "report":
                assert expected == paths.REPORT_RECORD.as_posix() and records[0].use_cache
            else:
                assert records[0].metric and not records[0].use_cache, stage.addressing
