"""The library's layers and the rule of names, written once (docs/design.md says why):

- a module of gpt1/ imports only modules of its own layer or of a layer below it (`LAYERS`,
  lowest first), at its top or inside a function, and no import of gpt1/ goes round in a circle;
- gpt1/ imports none of the folders that drive it (tasks/, flows/, bench/, tests/, tools/), nor
  Prefect or DVC, and each of those folders imports only what `FOLDER_IMPORTS` lets it;
- stage `X` runs `python -m tasks.X` (a stage `X_<variant>` runs `tasks.X` with an argument),
  whose job is `gpt1.jobs.X`, the one job it imports; every job is a stage's, and no job imports
  another;
- tests/ mirrors the code: `tests/<package>/test_<module>.py` tests `gpt1/<package>/<module>.py`
  (`tests/test_<module>.py` the top of gpt1/; `tests/{tasks,flows,bench}/` those folders,
  `tests/tools/` the generator's package), but for the end-to-end runs (tests/e2e/) and the few
  files of `ACROSS_MODULES`."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from pathlib import Path

import networkx as nx
import pytest

from gpt1.config import read_yaml
from tests.conftest import REPO

# lowest first: a module may import its own layer and those before it
LAYERS: tuple[tuple[str, ...], ...] = (
    ("gpt1.errors", "gpt1.atomic", "gpt1.config", "gpt1.progress", "gpt1.machine",
     "gpt1.records", "gpt1.presets", "gpt1.net", "gpt1.destinations",
     "gpt1.data_root"),
    ("gpt1.corpus",),
    ("gpt1.model",),
    ("gpt1.training",),
    ("gpt1.downstream",),
    ("gpt1.dag",),
    ("gpt1.interop",),
    ("gpt1.reporting",),
    ("gpt1.jobs",),
    ("gpt1.command_errors",),
    ("gpt1.sweep",),
    ("gpt1.cli", "gpt1.team"),
)
DRIVERS = ("tasks", "flows", "bench", "tests", "tools")  # what drives the library, never below it
NOT_IN_THE_LIBRARY = ("prefect", "dvc", "dvclive")
# the folders around the library, and which of ours each may import (docs/design.md)
FOLDER_IMPORTS = {
    "tasks": {"gpt1", "tasks"},
    "flows": {"gpt1", "tasks", "flows"},
    "bench": {"gpt1", "tasks", "bench", "reference"},
    "tools": {"gpt1", "tools"},
    "reference": {"reference"},
}
OURS = {"gpt1", *FOLDER_IMPORTS, "tests"}
# test files about many modules at once, each for a reason its docstring gives
ACROSS_MODULES = {
    "tests/test_docs.py",  # docs/ against the code
    "tests/test_dvc_yaml.py",  # dvc.yaml against the code
    "tests/test_layers.py",  # this file
    "tests/tasks/test_stage_modules.py",  # every stage driver is thin and imports no other
    "tests/tasks/test_stage_not_run.py",  # the task stages' records of why not
    "tests/flows/test_bad_input.py",  # every flow on bad input
    "tests/flows/test_parameters.py",  # what every deployment takes
    "tests/bench/test_list.py",  # `make bench` runs every benchmark
}


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(source: str) -> set[str]:
    """Every module `source` imports, anywhere in it (a function's body, `TYPE_CHECKING`);
    `from package import name` counts as `package.name` where that is a module."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
    return found


def import_graph(root: Path, package: str = "gpt1") -> nx.DiGraph:
    """Module -> the modules of `package` it imports (only those that exist)."""
    sources = {module_name(p, root): p.read_text(encoding="utf-8")
               for p in sorted((root / package).rglob("*.py"))}
    graph = nx.DiGraph()
    graph.add_nodes_from(sources)
    for module, source in sources.items():
        graph.add_edges_from((module, target) for target in imports(source)
                             if target in sources and target != module)
    return graph


def layer_of(module: str) -> int:
    matches = [(len(prefix), index) for index, layer in enumerate(LAYERS) for prefix in layer
               if module == prefix or module.startswith(prefix + ".")]
    if not matches:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS (tests/test_layers.py) "
                             "and to docs/design.md")
    return max(matches)[1]


def upward_imports(graph: nx.DiGraph) -> list[str]:
    return sorted(f"{a} imports {b}, a layer above it" for a, b in graph.edges
                  if a != "gpt1" and b != "gpt1" and layer_of(b) > layer_of(a))


def cycles(graph: nx.DiGraph) -> list[list[str]]:
    return [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]


def foreign_imports(sources: Iterable[tuple[str, str]]) -> list[str]:
    return [f"{module} imports {target}" for module, source in sources
            for target in sorted(imports(source))
            if target.split(".")[0] in DRIVERS + NOT_IN_THE_LIBRARY]


def library_sources() -> list[tuple[str, str]]:
    return [(module_name(p, REPO), p.read_text(encoding="utf-8"))
            for p in sorted((REPO / "gpt1").rglob("*.py"))]


def stage_drivers() -> dict[str, str]:
    """Stage -> the module of tasks/ its command runs."""
    stages = read_yaml((REPO / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    drivers = {}
    for name, stage in stages.items():
        cmd = stage["do"]["cmd"] if "do" in stage else stage["cmd"]
        match = re.fullmatch(r"python -m tasks\.(\w+)(?: .*)?", cmd)
        assert match, f"stage {name}: {cmd!r} is not `python -m tasks.<module> ...`"
        drivers[name] = match.group(1)
    return drivers


def test_the_checks_find_what_they_must(tmp_path: Path) -> None:
    """A library with an upward import, a cycle and a driver's import: each is found."""
    for module, source in {
        "gpt1/__init__.py": "",
        "gpt1/errors.py": "",
        "gpt1/corpus/__init__.py": "",
        "gpt1/corpus/a.py": "from gpt1.model import b\n",
        "gpt1/corpus/c.py": "def f():\n    import gpt1.corpus.d\n",
        "gpt1/corpus/d.py": "from gpt1.corpus import c\nfrom gpt1.errors import E\n",
        "gpt1/model/__init__.py": "",
        "gpt1/model/b.py": "from tasks.paths import X\nfrom gpt1 import errors\n",
    }.items():
        (tmp_path / module).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / module).write_text(source)
    graph = import_graph(tmp_path)
    assert set(graph.edges) == {("gpt1.corpus.a", "gpt1.model"),
                                ("gpt1.corpus.a", "gpt1.model.b"),
                                ("gpt1.corpus.c", "gpt1.corpus.d"),
                                ("gpt1.corpus.d", "gpt1.corpus"),
                                ("gpt1.corpus.d", "gpt1.corpus.c"),
                                ("gpt1.corpus.d", "gpt1.errors"),
                                ("gpt1.model.b", "gpt1"), ("gpt1.model.b", "gpt1.errors")}
    assert upward_imports(graph) == ["gpt1.corpus.a imports gpt1.model, a layer above it",
                                     "gpt1.corpus.a imports gpt1.model.b, a layer above it"]
    assert cycles(graph) == [["gpt1.corpus.c", "gpt1.corpus.d"]]
    assert foreign_imports([("gpt1.model.b", "from tasks.paths import X\nimport dvc.api\n")]) \
        == ["gpt1.model.b imports dvc.api", "gpt1.model.b imports tasks.paths",
            "gpt1.model.b imports tasks.paths.X"]
    with pytest.raises(AssertionError, match=r"gpt1\.nowhere is in no layer"):
        layer_of("gpt1.nowhere")


def test_every_import_points_down() -> None:
    assert upward_imports(import_graph(REPO)) == []


def test_no_two_modules_import_each_other() -> None:
    assert cycles(import_graph(REPO)) == []


def test_the_library_imports_none_of_its_drivers_nor_prefect_or_dvc() -> None:
    assert foreign_imports(library_sources()) == []


@pytest.mark.parametrize("folder", sorted(FOLDER_IMPORTS))
def test_a_folder_imports_only_what_it_may(folder: str) -> None:
    found = sorted(f"{module_name(p, REPO)} imports {target}"
                   for p in sorted((REPO / folder).rglob("*.py"))
                   for target in imports(p.read_text(encoding="utf-8"))
                   if target.split(".")[0] in OURS - FOLDER_IMPORTS[folder])
    assert found == [], f"{folder}/ may import only {sorted(FOLDER_IMPORTS[folder])} of ours"


def mirrored(test_file: Path, root: Path) -> Path:
    """The module (or package) a test file tests, by its place and name in tests/."""
    folder = test_file.parent.relative_to(root / "tests")
    name = test_file.stem.removeprefix("test_")
    if folder == Path("."):
        return root / "gpt1" / f"{name}.py"
    if folder.parts[0] in ("tasks", "flows", "bench"):
        return root / folder / f"{name}.py"
    if folder.parts[0] == "tools":
        return root / "tools" / name
    return root / "gpt1" / folder / f"{name}.py"


def test_a_test_file_is_named_after_what_it_tests() -> None:
    tests = [p for p in sorted((REPO / "tests").rglob("test_*.py"))
             if "e2e" not in p.relative_to(REPO).parts
             and p.relative_to(REPO).as_posix() not in ACROSS_MODULES]
    unmatched = [p.relative_to(REPO).as_posix() for p in tests if not mirrored(p, REPO).exists()]
    assert unmatched == [], "name each after the module it tests, or move it to tests/e2e/"
    assert mirrored(REPO / "tests" / "corpus" / "test_bpe.py", REPO) == (
        REPO / "gpt1" / "corpus" / "bpe.py")  # a module since renamed: found missing above
    assert all((REPO / f).is_file() for f in ACROSS_MODULES)


def test_every_module_is_in_a_layer() -> None:
    for module in import_graph(REPO):
        if module != "gpt1":
            layer_of(module)


def test_a_stage_runs_the_driver_and_the_job_of_its_name() -> None:
    drivers = stage_drivers()
    jobs = {module_name(p, REPO) for p in (REPO / "gpt1" / "jobs").glob("*.py")} - {"gpt1.jobs"}
    for stage, driver in drivers.items():
        assert stage == driver or stage.startswith(driver + "_"), (
            f"stage {stage} runs tasks.{driver}: name the driver after the stage")
        job_imports = {m for m in imports((REPO / "tasks" / f"{driver}.py").read_text())
                       if m.startswith("gpt1.jobs.") and m.count(".") == 2}
        assert job_imports == {f"gpt1.jobs.{driver}"}, (
            f"tasks/{driver}.py imports the jobs {sorted(job_imports)}, not gpt1.jobs.{driver}")
    assert jobs == {f"gpt1.jobs.{d}" for d in drivers.values()}, "a job that is no stage's"


def test_no_job_imports_another() -> None:
    graph = import_graph(REPO)
    shared = [(a, b) for a, b in graph.edges
              if a.startswith("gpt1.jobs.") and b.startswith("gpt1.jobs.")]
    assert shared == [], "what two jobs share lives in a layer below gpt1/jobs/"
