"""gpt1.sweep and `gpt1 sweep`: a grid over a task's fine-tuning knobs, checked against
params.yaml before anything is queued (each bad grid one line, exit 2, DVC never called), the
`dvc exp run --queue` it hands to DVC (Hydra's override grammar: `++` sets a key whether or not
the task's overrides hold it, a comma-separated list is one experiment per value), the
command that runs the queue, and the table and figure of a task's experiments read from
`dvc exp show --json` as DVC 3 writes it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpt1.cli import app
from gpt1.config import Params, load_params
from gpt1.errors import InputError
from gpt1.sweep import (
    check_grid,
    parse_grid,
    plot_sweep,
    points,
    queue_command,
    queue_jobs,
    run_command,
    sweep_runs,
    sweep_table,
)
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
    ("sst2", ["device=cpu,cuda:1"], "device='cuda:1': DVC's -S writes it unquoted into "
                                    "params.yaml, which breaks where the task's entry is a "
                                    "flow mapping"),
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


def test_the_queue_runs_in_the_foreground_as_many_at_once_as_asked() -> None:
    assert run_command(4, jobs=2) == ["dvc", "exp", "run", "--run-all", "-j", "2"]
    assert run_command(1) == ["dvc", "exp", "run", "--run-all", "-j", "1"]


@pytest.mark.parametrize(("grid", "expected"), [
    ({"lr": 0.001}, "lr: 0.001 is no list of values"),
    ({"lr": "0.001,0.002"}, "lr: '0.001,0.002' is no list of values"),
    ({"lr": []}, "lr: no values"),
    ({}, "give the grid as KEY=VALUE,VALUE..."),
    ({"epochs": [2, 2]}, "epochs=2,2: a value listed twice"),
    ({"epochs": [True]}, "epochs=True: Input should be a valid integer"),
])
def test_a_grid_given_as_a_mapping_is_checked_as_the_command_checks_it(
        params: Params, grid: dict[str, Any], expected: str) -> None:
    """The Prefect flow's parameter is a mapping: the same checks, and a few of its own."""
    with pytest.raises(InputError, match="^" + expected.replace("[", r"\[").replace(".", r"\.")):
        check_grid(params, "sst2", grid)
    assert check_grid(params, "sst2", {"lr": (0.0005, 0.002)}) == {"lr": [0.0005, 0.002]}


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
                 {"revs": [{"rev": "f" * 40, "name": "queued-one", "data": None}]},
                 # DVC's state of an experiment not done: its workspace holds the baseline's
                 # metrics, never its own score; its knobs are what its params say
                 {"revs": [{**_failed("killed-one", 0.0007, baseline), "error": {
                     "msg": "Experiment run failed", "type": ""}}],
                  "executor": {"state": "failed"}},
                 {"revs": [_failed("busy-one", 0.0008, baseline)],
                  "executor": {"state": "running"}}]}]
    table = sweep_table(sweep_runs(shown, "sst2", "accuracy"), "accuracy")
    assert table.columns == ["experiment", "lr", "accuracy (dev)", "seeds", "majority class",
                             "best"]
    assert table.rows() == [
        ("main", 0.001, "86.5", 1, "53.0", ""),  # finetune.train.lr, no override
        ("proxy-hips", 0.0005, "93.5 [92.5, 94.0]", 2, "53.0", "*"),
        ("weeny-suds", 0.002, "80.0 [79.0, 80.5]", 2, "53.0", ""),
        ("edited-one", 0.003, "70.0 [69.0, 70.5]", 2, "53.0", ""),
        ("queued-one", None, "", 0, "", ""),
        ("killed-one", 0.0007, "failed", 0, "", ""),
        ("busy-one", 0.0008, "running", 0, "", ""),
    ]


def _failed(name: str, lr: float, baseline: dict[str, Any]) -> dict[str, Any]:
    """An experiment of `lr` whose workspace still holds `baseline`'s metrics file."""
    exp = _exp(name, lr, None)
    exp["data"]["metrics"] = baseline["data"]["metrics"]
    return exp


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


def test_the_plot_draws_each_run_that_has_a_score(tmp_path: Path) -> None:
    shown = [{**_exp("main", None, 86.5, seeds=1), "experiments": [
        {"revs": [_exp("proxy-hips", 0.0005, 93.5)]},
        {"revs": [{"rev": "f" * 40, "name": "queued-one", "data": None}]}]}]
    runs = sweep_runs(shown, "sst2", "accuracy")
    plot_sweep(runs, "sst2", "accuracy", tmp_path / "sweep.png")
    assert (tmp_path / "sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(InputError, match="no experiment of sst2 has a dev score yet"):
        plot_sweep(runs[2:], "sst2", "accuracy", tmp_path / "none.png")


@pytest.mark.parametrize(("args", "expected"), [
    (["--plot", "x.png", "lr=0.1"], "--plot goes with --show"),
    (["--show", "--plot", "sweep.txt"], "--plot sweep.txt: name a .png, .svg, .pdf file"),
    (["--show", "--plot", ".dvc/sweep.png"], "--plot .dvc/sweep.png: "),
])
def test_a_bad_plot_destination_is_one_line(monkeypatch: pytest.MonkeyPatch,
                                            args: list[str], expected: str) -> None:
    def no_dvc(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"DVC called: {args}")

    monkeypatch.chdir(REPO)
    monkeypatch.setattr(subprocess, "run", no_dvc)
    result = CliRunner().invoke(app, ["sweep", "sst2", *args])
    assert result.exit_code == 2, result.output
    assert expected in result.output and result.output.count("\n") == 1, result.output
