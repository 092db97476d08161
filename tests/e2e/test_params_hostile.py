"""Hostile params.yaml (issue 45): a task's name that would reach a shell or climb out of the
checkout, a boolean where a number belongs, a number out of NumPy's and torch's range or not
finite. Each is refused where params.yaml is read (`load_params`, and `gpt1 set`), in one line
that names the file and the key, before any stage or DVC command runs."""

from __future__ import annotations

import copy
import hashlib
import subprocess
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML
from typer.testing import CliRunner

from gpt1.cli import app
from gpt1.config import (
    TASK_NAME_RULE,
    ParamsError,
    is_task_name,
    load_params,
    parse_params,
    read_yaml,
)
from gpt1.presets.edit import parse_assignments, set_keys
from tests.conftest import REPO, copy_repo, run

PARAMS = read_yaml((REPO / "params.yaml").read_text(encoding="utf-8"))
DVC_YAML = read_yaml((REPO / "dvc.yaml").read_text(encoding="utf-8"))
INJECTION = "x;touch PWNED;y"
HOSTILE_NAMES = [INJECTION, "$(touch PWNED)", "`touch PWNED`", "../../../../tmp/x", "a/b", "..",
                 ".", "", "my task", "sst2\n", "-rf", "all", "t" * 65, "tâche"]


@pytest.fixture()
def raw() -> dict:
    return copy.deepcopy(PARAMS)


def _error(raw: dict, tmp_path: Path) -> str:
    """The one line `load_params` refuses `raw` with, written as YAML (`.inf`, `true`)."""
    path = tmp_path / "params.yaml"
    YAML(typ="safe", pure=True).dump(raw, path)
    with pytest.raises(ParamsError) as info:
        load_params(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ") and "\n" not in message, message
    return message


def _set(raw: dict, dotted: str, value: object) -> None:
    *parents, leaf = dotted.split(".")
    node = raw
    for part in parents:
        node = node[part]
    node[leaf] = value


def _renamed(mapping: dict, name: str) -> dict:
    """`mapping` with its first key renamed `name`, in its place."""
    first = next(iter(mapping))
    return {name if key == first else key: value for key, value in mapping.items()}


# -- task names: they name stages and folders ------------------------------------------------


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_a_registry_task_named_for_a_shell_or_a_path_is_refused(raw: dict, tmp_path: Path,
                                                                 name: str) -> None:
    raw["tasks"] = _renamed(raw["tasks"], name)
    message = _error(raw, tmp_path)
    assert f": tasks.{name!r}: " in message or f": tasks.{name}: " in message, message
    assert message.endswith(f": {TASK_NAME_RULE}; got {name!r}"), message


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_a_requested_task_named_for_a_shell_or_a_path_is_refused(raw: dict, tmp_path: Path,
                                                                  name: str) -> None:
    raw["finetune"]["tasks"] = ["sst2", name]
    message = _error(raw, tmp_path)
    assert f": finetune.tasks.1: {TASK_NAME_RULE}; got {name!r}" in message


@pytest.mark.parametrize("analysis", ["ablation", "transfer", "zero_shot"])
def test_an_analysis_task_named_for_a_shell_is_refused(raw: dict, tmp_path: Path,
                                                       analysis: str) -> None:
    """Named as the rule says, not merely as a task the registry lacks."""
    section = raw["analysis"][analysis]
    section["tasks"] = _renamed(section["tasks"], INJECTION)
    message = _error(raw, tmp_path)
    assert f": analysis.{analysis}.tasks.{INJECTION!r}: {TASK_NAME_RULE}" in message


def test_every_task_name_shipped_or_suggested_is_one() -> None:
    presets = [read_yaml(p.read_text(encoding="utf-8")) for p in (REPO / "gpt1/presets").glob(
        "*.yaml")]
    shipped = {*PARAMS["tasks"], *PARAMS["finetune"]["tasks"]} | {
        name for params in [PARAMS, *presets] for key in ("ablation", "transfer", "zero_shot")
        for name in params.get("analysis", {}).get(key, {}).get("tasks", {})}
    assert {"sst2", "story_cloze", "mnli", "stsb"} <= shipped
    for name in [*shipped, "my_reviews", "Reviews2", "2nd", "t" * 64]:
        assert is_task_name(name), name
    load_params(REPO / "params.yaml")


def test_no_dvc_command_carries_a_params_value() -> None:
    """DVC builds a stage's shell command from dvc.yaml before the stage reads params.yaml, and
    `dvc repro --single-item` runs it without any other stage having read it first: a command
    that interpolated `${key}` would hand a task's name to the shell. The stages read their
    item from the stage's name instead (`tasks.stage.add_item_arguments`)."""
    commands = {name: stage.get("do", stage)["cmd"] for name, stage in DVC_YAML["stages"].items()}
    assert {"finetune", "predict", "ablation", "transfer", "zero_shot"} <= set(commands)
    assert {name: cmd for name, cmd in commands.items() if "${" in cmd} == {}


@pytest.mark.parametrize("source", ["tasks", "analysis.ablation.tasks",
                                    "analysis.transfer.tasks", "analysis.zero_shot.tasks",
                                    "finetune.tasks"])
def test_every_list_of_tasks_a_stage_is_named_after_is_validated(raw: dict, tmp_path: Path,
                                                                 source: str) -> None:
    """A name a foreach or matrix stage is named after (`finetune@<task>`) with shell syntax
    in it is refused at load, naming the key."""
    *parents, leaf = source.split(".")
    node = raw
    for part in parents:
        node = node[part]
    value = node[leaf]
    node[leaf] = (_renamed(value, INJECTION) if isinstance(value, dict)
                  else [INJECTION, *value[1:]])
    assert f": {source}." in _error(raw, tmp_path)


@pytest.mark.parametrize("name", [INJECTION, "../../../escaped"])
def test_a_hostile_task_name_stops_ingest_before_it_writes(tmp_path: Path, name: str) -> None:
    """Ingest (the stage DVC runs first, as it depends on `tasks`) stops at load with the one
    line: no folder data/raw/tasks/<name>, none climbing out of it (`../../../escaped` would be
    tmp_path/escaped)."""
    raw = copy.deepcopy(PARAMS)
    raw["ingest"]["root"] = str(REPO / raw["ingest"]["root"])
    raw["tasks"] = _renamed(raw["tasks"], name)
    params = tmp_path / "params.yaml"
    YAML(typ="safe", pure=True).dump(raw, params)
    proc = run([sys.executable, "-m", "tasks.ingest", "--params", str(params)], tmp_path,
               env={"PYTHONPATH": str(REPO)}, check=False)
    assert proc.returncode == 2, proc.stderr
    assert f"{params}: tasks.{name!r}: {TASK_NAME_RULE}" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["params.yaml"]


def _files(repo: Path) -> dict[str, str]:
    return {p.relative_to(repo).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(repo.rglob("*")) if p.is_file()
            and not {".git", ".dvc", "__pycache__"} & set(p.relative_to(repo).parts)}


@pytest.mark.e2e
def test_dvc_repro_of_an_injected_task_name_runs_no_command_with_it(tmp_path: Path) -> None:
    """`dvc repro` on a checkout whose params.yaml names a task `x;touch PWNED;y`: the first
    stage (`code`, which every other needs) runs and fails in one line, nothing written (but
    its record, which DVC itself removes before it runs the stage), so that no stage of the
    task runs. Then `dvc repro --single-item 'finetune@x;touch PWNED;y'` on a dag.yaml that
    lists the task (as one written before the name was put in by hand would), which runs that
    stage alone: it fails at load in the same line, and no shell ran the name (no file
    PWNED)."""
    repo = copy_repo(tmp_path / "repo")
    params = repo / "params.yaml"
    text = params.read_text(encoding="utf-8")
    params.write_text(text.replace("\n  cola:\n", f"\n  {INJECTION!r}:\n", 1),
                      encoding="utf-8")
    before = _files(repo)
    proc = run([sys.executable, "-m", "dvc", "repro"], repo, check=False)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output
    assert f"params.yaml: tasks.{INJECTION!r}: {TASK_NAME_RULE}" in output, output
    assert "Running stage 'code'" in output, output
    assert "Running stage 'ingest'" not in output and "Running stage 'finetune" not in output
    assert not (repo / "PWNED").exists()
    before.pop("metrics/stages/code.json", None)
    assert _files(repo) == before

    # the one stage alone, its dependencies there: its command holds no name to run
    dag_file = repo / "dag.yaml"
    listed = dag_file.read_text(encoding="utf-8")
    assert '  finetune: ["sst2"]\n' in listed
    dag_file.write_text(listed.replace('  finetune: ["sst2"]\n',
                                       f'  finetune: ["sst2", "{INJECTION}"]\n'),
                        encoding="utf-8")
    for folder in ("data/raw/tasks/" + INJECTION, "artifacts/pretrain", "artifacts/code"):
        (repo / folder).mkdir(parents=True, exist_ok=True)
    (repo / "artifacts/code/finetune.json").write_text("{}\n")  # stage code's, not run here
    single = run([sys.executable, "-m", "dvc", "repro", "--single-item", f"finetune@{INJECTION}"],
                 repo, check=False)
    output = single.stdout + single.stderr
    assert single.returncode != 0, output
    assert f"Running stage 'finetune@{INJECTION}'" in output, output
    assert f"params.yaml: tasks.{INJECTION!r}: {TASK_NAME_RULE}" in output, output
    assert not (repo / "PWNED").exists()


# -- numbers: of their type, in range, finite --------------------------------------------------


@pytest.mark.parametrize(("key", "value", "expected"), [
    ("pretrain.lr", True, "pretrain.lr: Input should be a valid number (got True)"),
    ("model.n_layer", True, "model.n_layer: Input should be a valid integer (got True)"),
    ("pretrain.seed", True, "pretrain.seed: Input should be a valid integer (got True)"),
    ("finetune.train.epochs", False, "finetune.train.epochs: Input should be a valid integer"),
    ("finetune.seeds", [True], "finetune.seeds.0: Input should be a valid integer (got True)"),
    ("model.n_ctx", 64.0, "model.n_ctx: Input should be a valid integer (got 64.0)"),
    ("model.n_ctx", "64", "model.n_ctx: Input should be a valid integer (got '64')"),
    ("pretrain.lr", "0.1", "pretrain.lr: Input should be a valid number (got '0.1')"),
    ("clean.dedupe", 1, "clean.dedupe: Input should be a valid boolean (got 1)"),
    ("tasks.sst2.overrides", {"epochs": True},
     "tasks.sst2.overrides.epochs: Input should be a valid integer (got True)"),
    ("tasks.sst2.overrides", {"lr": True},
     "tasks.sst2.overrides.lr: Input should be a valid number (got True)"),
    ("pretrain.seed", 10**23, "pretrain.seed: Input should be less than 4294967296"),
    ("pretrain.seed", 2**32, "pretrain.seed: Input should be less than 4294967296"),
    ("pretrain.seed", -1, "pretrain.seed: Input should be greater than or equal to 0"),
    ("finetune.seeds", [-1], "finetune.seeds.0: Input should be greater than or equal to 0"),
    ("analysis.seeds", [1, 2**40], "analysis.seeds.1: Input should be less than 4294967296"),
    ("lm_eval.sample.seed", -5, "lm_eval.sample.seed: Input should be greater than or equal"),
    ("tasks.story_cloze.holdout.seed", 2**32, "tasks.story_cloze.holdout.seed: Input should be "
                                              "less than"),
    ("model.n_layer", 2**31, "model.n_layer: Input should be less than or equal to 2147483647"),
    ("tokenize.shard_tokens", 10**23, "tokenize.shard_tokens: Input should be less than or"),
    ("bpe.vocab_size", 2**32, "bpe.vocab_size: Input should be less than or equal to 4294967295"),
    ("flows.retry_delay_seconds", float("inf"), "flows.retry_delay_seconds: Input should be a "
                                                "finite number (got inf)"),
    ("flows.lock_timeout_seconds", float("nan"), "flows.lock_timeout_seconds: Input should be a "
                                                 "finite number (got nan)"),
    ("flows.retry_delay_seconds", 1e300, "flows.retry_delay_seconds: Input should be less than "
                                         "or equal to 2592000"),
    ("pretrain.lr", float("inf"), "pretrain.lr: Input should be a finite number"),
    ("model.dropout", float("nan"), "model.dropout: Input should be a finite number"),
    ("pretrain.peak_tflops", float("inf"), "pretrain.peak_tflops: Input should be a finite"),
    ("lm_eval.sample.temperature", float("inf"), "lm_eval.sample.temperature: Input should be a "
                                                 "finite number"),
    ("tasks.sst2.paper", {"dev": float("nan")}, "tasks.sst2.paper.dev: Input should be a finite"),
    ("tasks.sst2.overrides", {"lm_coef": float("inf")},
     "tasks.sst2.overrides.lm_coef: Input should be a finite number (got inf)"),
    ("ingest.root", "", "ingest.root: String should have at least 1 character"),
])
def test_a_number_of_the_wrong_type_or_range_is_refused(raw: dict, tmp_path: Path, key: str,
                                                        value: object, expected: str) -> None:
    _set(raw, key, value)
    assert f": {expected}" in _error(raw, tmp_path)


@pytest.mark.parametrize(("key", "value"), [
    ("pretrain.lr", 1),  # a whole number is a fine real
    ("finetune.train.weight_decay", 0),
    ("tasks.sst2.overrides", {"lr": 1, "epochs": 2}),
    ("pretrain.seed", 0),
    ("pretrain.seed", 2**32 - 1),
    ("finetune.seeds", [0, 4_294_967_295]),
    ("tasks.story_cloze.holdout.seed", 3535999445),  # the original code's, above 2**31
    ("model.n_ctx", 100_000_000),  # too large for memory, which pretrain says (the catalogue)
    ("bpe.vocab_size", 2**32 - 1),
    ("flows.lock_timeout_seconds", 86_400),
])
def test_numbers_in_range_load(raw: dict, key: str, value: object) -> None:
    _set(raw, key, value)
    parse_params(raw)


@pytest.mark.parametrize("assignment", [
    "pretrain.lr=true", "model.n_layer=true", "pretrain.seed=true",
    "tasks.sst2.overrides={epochs: true}", "pretrain.seed=100000000000000000000000",
    "finetune.seeds=[-1]", "flows.retry_delay_seconds=.inf", "pretrain.lr=.nan",
    "finetune.tasks=[my task]", f"finetune.tasks=['{INJECTION}']",
])
def test_gpt1_set_refuses_it_and_writes_nothing(tmp_path: Path, assignment: str) -> None:
    path = tmp_path / "params.yaml"
    path.write_bytes((REPO / "params.yaml").read_bytes())
    with pytest.raises(ParamsError) as info:
        set_keys(path, parse_assignments([assignment]))
    key = assignment.partition("=")[0]
    assert str(info.value).startswith(f"{path}: {key}") and "\n" not in str(info.value)
    assert path.read_bytes() == (REPO / "params.yaml").read_bytes()


@pytest.mark.parametrize("seed", ["100000000000000000000000", "4294967296", "-1"])
def test_generate_refuses_a_seed_numpy_and_torch_cannot_take(seed: str) -> None:
    result = CliRunner().invoke(app, ["generate", "--model", "nowhere", "--prompt", "a",
                                      "--seed", seed])
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--seed'" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_generate_takes_the_largest_seed() -> None:
    """4294967295 passes the option: it fails on the missing model instead."""
    proc = subprocess.run([sys.executable, "-m", "gpt1.cli", "generate", "--model", "nowhere",
                           "--prompt", "a", "--seed", "4294967295"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "error: nowhere/config.json: not found" in proc.stderr, proc.stderr
