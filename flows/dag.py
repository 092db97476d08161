"""The stage graph as DVC declares it in dvc.yaml: the only list of stages there is."""

from __future__ import annotations

from pathlib import Path

import networkx as nx
from dvc.repo import Repo
from dvc.stage import Stage

from gpt1.errors import InputError


def _address(stage: Stage, repo_root: Path) -> str:
    """How `dvc repro` run in `repo_root` names the stage: `finetune@sst2`, or `sub/dvc.yaml:x`
    for a stage declared in another dvc.yaml."""
    dvcfile = Path(stage.path).resolve().relative_to(repo_root.resolve())
    return stage.name if dvcfile == Path("dvc.yaml") else f"{dvcfile.as_posix()}:{stage.name}"


def _graph(repo_root: Path) -> tuple[nx.DiGraph, list[str]]:
    """Stage addresses, with an edge from each stage to each stage it needs; and the addresses
    in the order dvc.yaml declares them."""
    with Repo(str(repo_root)) as repo:
        stages = repo.index.graph
        declared = [_address(s, repo_root) for s in repo.index.stages]
        return nx.relabel_nodes(stages, {s: _address(s, repo_root) for s in stages.nodes}), declared


def run_order(repo_root: Path) -> list[str]:
    """Every stage, each after all the stages it depends on; stages free to run in any order
    keep dvc.yaml's order (the task registry's, for the fine-tunes)."""
    graph, declared = _graph(repo_root)
    return list(nx.lexicographical_topological_sort(graph.reverse(), key=declared.index))


def _around(repo_root: Path, target: str, downstream: bool) -> list[str]:
    """`target`, the stages it needs and, if `downstream`, those that need it, in run order."""
    graph, _ = _graph(repo_root)
    if target not in graph:
        # a deployment's parameter (`-p task=...`): the user's input, not retried
        raise InputError(f"no stage {target!r} in dvc.yaml; stages: {sorted(graph.nodes)}")
    wanted = {target} | nx.descendants(graph, target)  # edges point at what a stage needs
    if downstream:
        wanted |= nx.ancestors(graph, target)
    return [stage for stage in run_order(repo_root) if stage in wanted]


def rerun_order(repo_root: Path, target: str) -> list[str]:
    """What re-running `target` involves, in run order: its upstream stages (run only if they
    changed), `target` itself, and the stages downstream of it."""
    return _around(repo_root, target, downstream=True)


def upstream_order(repo_root: Path, target: str) -> list[str]:
    """`target` and the stages it needs, in run order: what `dvc repro <target>` runs."""
    return _around(repo_root, target, downstream=False)
