"""gpt1.sweep and `gpt1 sweep`: a grid over a task's fine-tuning knobs, checked against
params.yaml before anything is queued (each bad grid one line, exit 2, DVC never called), the
`dvc exp run --queue` it hands to DVC (Hydra's override grammar: `++` sets a key whether or not
the task's overrides hold it, a comma-separated list is one experiment per value), and the
table of a task's experiments read from `dvc exp show --json` as DVC 3 writes it."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from typer.testing import CliRunner

from gpt1.cli import app
from gpt1.config import Params, load_params
from gpt1.sweep import parse_grid, points, queue_command, queue_jobs, sweep_table
from tests.conftest import REPO


@pytest.fixture(scope="module")
def params() -> Params:
    """The repository's params.yaml: SST-2 fine-tuned."""
    return load_params(REPO / "params.yaml")


def test_a_grid_is_read_as_yaml_values_per_knob(params: Params) -> None:
    grid = parse_grid(params, "sst2", ["lr=0.0005, 0.002", "epochs=2,3", "lm_coef=0"])
    assert grid == {"lr": [0.0005, 0.002], "epochs": [2, 3], "lm_coef": [0]}
    assert len(points(grid)) == 4 and points(grid)[1] == {"lr": 0.0005, "epochs": 3,
                                                         "lm_coef": 0}


def test_the_queue_command_is_dvcs_own_grid() -> None:
    assert queue_command("sst2", {"lr": [0.0005, 1e-05], "epochs": [2, 3]}) == [
        "dvc", "exp", "run", "--queue",
        "-S", "++tasks.sst2.overrides.lr=0.0005,1e-05",
        "-S", "++tasks.sst2.overrides.epochs=2,3", "finetune@sst2"]


@pytest.mark.parametrize(("task", "grid", "expected"), [
    ("sst2", ["momentum=0.9"], "'momentum': not a fine-tuning knob (the knobs: "),
    ("sst2", ["lr="], "lr: no values; list them comma-separated (lr=a,b)"),
    ("sst2", ["lr=0.1,,0.2"], "lr=0.1,,0.2: an empty value between commas"),
    ("sst2", ["lr=fast"], "lr='fast': Input should be a valid number"),
    ("sst2", ["epochs=2.5"], "epochs=2.5: Input should be a valid integer"),
    ("sst2", ["epochs=0"], "epochs=0: Input should be greater than 0"),
    ("sst2", ["lr=0.1,0.1"], "lr=0.1,0.1: a value listed twice"),
    ("sst2", ["lr=0.1", "lr=0.2"], "lr: given twice; list its values once, comma-separated"),
    ("sst2", ["lr"], "'lr': expected KEY=VALUE,VALUE... (e.g. lr=0.0005,0.001)"),
    ("sst2", [], "give the grid as KEY=VALUE,VALUE..."),
    ("imdb", ["lr=0.1"], "task 'imdb' is not in the task registry (tasks: ['cola', "),
    ("rte", ["lr=0.1"], "task 'rte' is not fine-tuned (finetune.tasks: ['sst2']): add it, "
                        "e.g. gpt1 set 'finetune.tasks=[sst2, rte]'"),
])
def test_a_bad_grid_is_one_line_and_queues_nothing(monkeypatch: pytest.MonkeyPatch,
                                                   task: str, grid: list[str],
                                                   expected: str) -> None:
    def no_dvc(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"DVC called: {args}")

    monkeypatch.chdir(REPO)
    monkeypatch.setattr(subprocess, "run", no_dvc)
    result = CliRunner().invoke(app, ["sweep", task, *grid])
    assert result.exit_code == 2, result.output
    assert result.output.startswith(f"error: {expected}"), result.output
    assert result.output.count("\n") == 1


def test_the_jobs_suggested_share_the_cores_and_never_exceed_the_points() -> None:
    assert queue_jobs(4, cpus=2) == 1
    assert queue_jobs(4, cpus=16) == 4
    assert queue_jobs(8, cpus=8) == 4
    assert queue_jobs(1, cpus=1) == 1


def _exp(name: str, lr: float | None, accuracy: float | None, seeds: int = 2,
         trained_lr: float | None = None) -> dict[str, Any]:
    """One commit or experiment as `dvc exp show --json` (DVC 3) gives it: its params files
    whole, its metrics files' numbers and mappings (DVC leaves lists out); the metrics say the
    run trained with `trained_lr` where given (else with what its params say)."""
    overrides = {} if lr is None else {"lr": lr}
    params = load_params(REPO / "params.yaml").model_dump(mode="json")
    params["tasks"]["sst2"]["overrides"] = overrides
    knobs = {**params["finetune"]["train"], **overrides}
    if trained_lr is not None:
        knobs["lr"] = trained_lr
    metrics = {} if accuracy is None else {"metrics/finetune/sst2.json": {"data": {
        "task": "sst2", "run": True, "split": "dev", "accuracy": accuracy,
        "accuracy_min": accuracy - 1, "accuracy_max": accuracy + 0.5, "majority_accuracy": 53.0,
        "by_seed": {str(s): {"accuracy": accuracy} for s in range(seeds)}, "knobs": knobs}}}
    return {"rev": f"{name:0<40}", "name": name,
            "data": {"params": {"params.yaml": {"data": params}}, "metrics": metrics}}


def test_the_experiments_side_by_side_with_the_best_marked() -> None:
    baseline = _exp("main", None, 86.5, seeds=1)
    shown = [{"rev": "workspace", "name": None, "data": baseline["data"]},
             {**baseline, "experiments": [
                 {"revs": [_exp("proxy-hips", 0.0005, 93.5)], "name": "proxy-hips"},
                 {"revs": [_exp("weeny-suds", 0.002, 80.0)], "name": "weeny-suds"},
                 # params edited after the run: the table shows what it trained with
                 {"revs": [_exp("edited-one", 0.009, 70.0, trained_lr=0.003)]},
                 {"revs": [{"rev": "f" * 40, "name": "queued-one", "data": None}]}]}]
    table = sweep_table(shown, "sst2", "accuracy")
    assert table.columns == ["experiment", "lr", "accuracy (dev)", "seeds", "majority class",
                             "best"]
    assert table.rows() == [
        ("main", 0.001, "86.5", 1, "53.0", ""),  # finetune.train.lr, no override
        ("proxy-hips", 0.0005, "93.5 [92.5, 94.0]", 2, "53.0", "*"),
        ("weeny-suds", 0.002, "80.0 [79.0, 80.5]", 2, "53.0", ""),
        ("edited-one", 0.003, "70.0 [69.0, 70.5]", 2, "53.0", ""),
        ("queued-one", None, "", 0, "", ""),
    ]


def test_show_prints_the_table_dvc_exp_show_gives(monkeypatch: pytest.MonkeyPatch) -> None:
    shown = [_exp("main", None, 86.5, seeds=1)]

    def fake_dvc(command: list[str], **kwargs: object) -> subprocess.CompletedProcess:
        assert command == ["dvc", "exp", "show", "--json"]
        return subprocess.CompletedProcess(command, 0, json.dumps(shown), "")

    monkeypatch.chdir(REPO)
    monkeypatch.setattr(subprocess, "run", fake_dvc)
    result = CliRunner().invoke(app, ["sweep", "sst2", "--show"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[:3] == [
        "| experiment | accuracy (dev) | seeds | majority class | best |",
        "|------------|----------------|-------|----------------|------|",
        "| main       | 86.5           | 1     | 53.0           | *    |"]
