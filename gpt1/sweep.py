"""A task's fine-tuning knobs swept as DVC experiments. `gpt1 sweep <task> lr=a,b epochs=c,d`
checks the grid against params.yaml (`parse_grid`) and queues it as one `dvc exp run --queue` of
`finetune@<task>` (`queue_command`), whose `-S` lists DVC expands into one experiment per
point; DVC's queue runs them (`dvc exp run --run-all -j N`: `run_command`). `gpt1 sweep
<task> --show` reads `dvc exp show --json` (`sweep_runs`) and sets each experiment's dev score
beside the majority class, the spread over seeds and the best marked, as a table
(`sweep_table`) and a figure (`plot_sweep`). Nothing here imports DVC or runs an experiment:
the experiments are DVC's own."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import product
from pathlib import Path
from typing import Any

import polars as pl
from pydantic import ValidationError

from gpt1.config import FinetuneKnobs, Params, ParamsError, parse_params
from gpt1.errors import InputError
from gpt1.presets.edit import parse_assignments
from gpt1.reporting.plots import Point, plot_points

PARAMS_FILE = "params.yaml"
# characters a YAML plain scalar cannot hold inside a flow mapping: DVC's -S writes a string
# value unquoted, and a `device: cuda:1` in `{lr: 0.1, device: cuda:1}` leaves params.yaml
# unreadable after the grid's first point is queued
FLOW_INDICATORS = frozenset(":,[]{}#")


def parse_grid(params: Params, task: str, assignments: list[str]) -> dict[str, list[Any]]:
    """`["lr=0.0005,0.001", "epochs=2,3"]` -> `{"lr": [0.0005, 0.001], "epochs": [2, 3]}`, each
    value read as YAML, then checked as `check_grid` checks a grid. Refused in one line besides:
    a key given twice, an empty value between commas."""
    if not assignments:
        params.task(task)  # a task the registry lacks is named before the missing grid
        raise InputError("give the grid as KEY=VALUE,VALUE... (e.g. lr=0.0005,0.001 epochs=2,3)")
    grid: dict[str, list[Any]] = {}
    for item in assignments:
        key, sep, values = item.partition("=")
        if not sep:
            raise InputError(f"{item!r}: expected KEY=VALUE,VALUE... (e.g. lr=0.0005,0.001)")
        if key in grid:
            raise InputError(f"{key}: given twice; list its values once, comma-separated")
        texts = [text.strip() for text in values.split(",")]
        if any(texts) and "" in texts:
            raise InputError(f"{key}={values}: an empty value between commas")
        grid[key] = [parse_assignments([f"{key}={text}"])[key] for text in texts if text]
    return check_grid(params, task, grid)


def check_grid(params: Params, task: str, grid: Mapping[str, Sequence[Any]]
               ) -> dict[str, list[Any]]:
    """`grid` (knob -> the values to try) as a plain dict, once each key is a knob of
    `finetune.train` (a task override) and each value passes the checks the task's override
    would. Refused before anything is queued, in one line: a task not declared or not
    fine-tuned, an empty grid, an unknown key, an empty list, a value listed twice or of the
    wrong type."""
    params.task(task)  # bad input, naming the registry, where it has no such task
    if task not in params.requested_tasks():
        raise InputError(f"task {task!r} is not fine-tuned (finetune.tasks: "
                         f"{params.finetune.tasks}): add it, e.g. gpt1 set "
                         f"'finetune.tasks=[{', '.join([*params.requested_tasks(), task])}]'")
    if not grid:
        raise InputError("give the grid as KEY=VALUE,VALUE... (e.g. lr=0.0005,0.001 epochs=2,3)")
    checked: dict[str, list[Any]] = {}
    for key, values in grid.items():
        if key not in FinetuneKnobs.model_fields:
            raise InputError(f"{key!r}: not a fine-tuning knob (the knobs: "
                             f"{', '.join(FinetuneKnobs.model_fields)})")
        if isinstance(values, str | bytes) or not isinstance(values, Sequence):
            raise InputError(f"{key}: {values!r} is no list of values")
        if not values:
            raise InputError(f"{key}: no values; list them comma-separated ({key}=a,b)")
        if len(set(map(repr, values))) != len(values):
            raise InputError(f"{key}={','.join(map(str, values))}: a value listed twice")
        for value in values:
            _check_value(params, task, key, value)
            if isinstance(value, str) and FLOW_INDICATORS & set(value):
                raise InputError(
                    f"{key}={value!r}: DVC's -S writes it unquoted into params.yaml, which "
                    f"breaks where the task's entry is a flow mapping ({{...}}); set it with "
                    f"gpt1 set and sweep the other knobs")
        checked[key] = list(values)
    return checked


def _check_value(params: Params, task: str, key: str, value: Any) -> None:
    spec = params.tasks[task]
    try:
        params.finetune.for_task(spec.model_copy(update={"overrides": {**spec.overrides,
                                                                        key: value}}),
                                 params.finetune.seeds[0])
    except ValidationError as err:
        first = err.errors()[0]
        raise InputError(f"{key}={value!r}: {first['msg']}") from None


def points(grid: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Every point of the grid, as DVC expands it: the product of the lists."""
    return [dict(zip(grid, values, strict=True)) for values in product(*grid.values())]


def _hydra(value: Any) -> str:
    """A value as DVC's `-S` (Hydra's override grammar) reads it back the same."""
    if isinstance(value, bool):
        return str(value).lower()
    return repr(value) if isinstance(value, float) else str(value)


def queue_command(task: str, grid: dict[str, list[Any]]) -> list[str]:
    """`dvc exp run --queue` of `finetune@<task>` with one `-S` per knob, its values
    comma-separated (DVC queues one experiment per point). `++` sets the task's override
    whether or not `tasks.<task>.overrides` has the key already: a plain `-S` on a key that is
    not there, or on the mapping as a whole, is refused by Hydra ("not in struct")."""
    sets = [arg for key, values in grid.items()
            for arg in ("-S", f"++tasks.{task}.overrides.{key}="
                              f"{','.join(_hydra(v) for v in values)}")]
    return ["dvc", "exp", "run", "--queue", *sets, f"finetune@{task}"]


def queue_jobs(n_points: int, cpus: int | None = None) -> int:
    """How many experiments to run at once: each trains with every core it is given, so more
    than one per two cores only shares them; never more than the points."""
    if cpus is None:
        cpus = os.cpu_count() or 1
    return max(1, min(n_points, cpus // 2))


def run_command(n_points: int, jobs: int | None = None) -> list[str]:
    """`dvc exp run --run-all -j N`: the queue run in the foreground, `jobs` at a time
    (`queue_jobs` where not given), each run's log followed until the last one ends."""
    return ["dvc", "exp", "run", "--run-all", "-j", str(jobs or queue_jobs(n_points))]


@dataclass(frozen=True)
class SweepRun:
    """A commit or experiment of `dvc exp show`, as a sweep sees it: the knobs it trained with
    (those its params give where it has not run), DVC's state of it, and its headline dev
    figure, median [low, high] over `seeds`, beside the majority class; no score where it has
    not run or failed."""

    name: str
    knobs: dict[str, Any] = field(default_factory=dict)
    state: str = "success"  # DVC's executor state: success, queued, running, failed
    split: str | None = None
    score: float | None = None
    low: float | None = None
    high: float | None = None
    seeds: int = 0
    majority: float | None = None


def sweep_runs(exp_show: list[dict[str, Any]], task: str, metric: str) -> list[SweepRun]:
    """The commits of `dvc exp show --json` and their experiments, a `SweepRun` each for `task`
    and its headline figure `metric` (the task's first, on its first eval split)."""
    runs = []
    for commit in exp_show:
        if commit.get("rev") == "workspace":
            continue
        runs.append(_run(commit.get("name") or commit["rev"][:7], commit.get("data"), task,
                         metric))
        for experiment in commit.get("experiments") or []:
            state = ((experiment.get("executor") or {}).get("state")) or "success"
            for rev in experiment.get("revs", []):
                runs.append(_run(rev.get("name") or rev["rev"][:7], rev.get("data"), task,
                                 metric, "failed" if rev.get("error") else state))
    if not runs:
        raise InputError("no commit or experiment found: run gpt1 sweep in a git checkout")
    return runs


def varied_knobs(runs: list[SweepRun]) -> list[str]:
    """The knobs whose values differ between the runs that have them."""
    known = [run.knobs for run in runs if run.knobs]  # a queued or failed one has none
    return [key for key in FinetuneKnobs.model_fields
            if len({repr(knobs.get(key)) for knobs in known}) > 1]


def best(runs: list[SweepRun]) -> list[SweepRun]:
    """The runs of the highest score (each of those that tie)."""
    top = max((run.score for run in runs if run.score is not None), default=None)
    return [run for run in runs if top is not None and run.score == top]


def sweep_table(runs: list[SweepRun], metric: str) -> pl.DataFrame:
    """A row per run: the knobs that differ between them, the score (median [min, max] over
    seeds), the seeds, the majority class and the best marked `*`."""
    knobs, top = varied_knobs(runs), best(runs)
    split = next((run.split for run in runs if run.split), "dev")
    return pl.DataFrame([{
        "experiment": run.name,
        **{key: run.knobs.get(key) for key in knobs},
        f"{metric} ({split})": (run.state if run.state != "success" else "")
        if run.score is None else
        f"{run.score:.1f}" + ("" if run.seeds <= 1 else f" [{run.low:.1f}, {run.high:.1f}]"),
        "seeds": run.seeds,
        "majority class": "" if run.majority is None else f"{run.majority:.1f}",
        "best": "*" if run in top else "",
    } for run in runs], infer_schema_length=None)


def table_text(table: pl.DataFrame) -> str:
    """The table as markdown, every row and column, without polars' dtypes and shape."""
    with pl.Config(tbl_formatting="ASCII_MARKDOWN", tbl_hide_column_data_types=True,
                   tbl_hide_dataframe_shape=True, tbl_rows=-1, tbl_cols=-1,
                   tbl_width_chars=200):
        return str(table)


def plot_sweep(runs: list[SweepRun], title: str, metric: str, path: Path) -> None:
    """The runs that have a score as `plot_points` draws them, under the task's `title`: each
    labelled by its name and the knobs that differ, the best marked."""
    knobs, top = varied_knobs(runs), best(runs)
    scored = [run for run in runs if run.score is not None]
    if not scored:
        raise InputError(f"no experiment of {title} has a dev score yet: nothing to plot")
    points = [Point(label="\n".join([run.name, " ".join(f"{key}={run.knobs.get(key)}"
                                                        for key in knobs)]).strip(),
                    median=run.score, low=run.low, high=run.high, majority=run.majority,
                    best=run in top)
              for run in scored]
    split = next((run.split for run in runs if run.split), "dev")
    plot_points(points, f"{title}: {metric} ({split}) per experiment", path)


def _run(name: str, data: dict[str, Any] | None, task: str, metric: str,
         state: str = "success") -> SweepRun:
    """One commit's or experiment's knobs for `task` and its figures of `metric` (none where
    its metrics file for the task is absent, or DVC's `state` of it is not success: an
    experiment queued, running or failed holds its baseline's metrics). The knobs are those its
    metrics file says the run trained with, else (not run yet) those its params.yaml gives.
    DVC's JSON keeps a metrics file's numbers and mappings, not its lists: the seeds are
    counted from `by_seed`."""
    if not data:
        return SweepRun(name, state=state)
    knobs: dict[str, Any] = {}
    raw = ((data.get("params") or {}).get(PARAMS_FILE) or {}).get("data")
    if raw:
        try:
            params = parse_params(raw)
        except ParamsError:  # an experiment of params this code no longer reads: no knobs
            params = None
        if params is not None and task in params.tasks:
            trained = params.finetune.for_task(params.tasks[task], params.finetune.seeds[0])
            knobs = trained.model_dump(exclude={"seed"})
    metrics = ((data.get("metrics") or {}).get(f"metrics/finetune/{task}.json") or {}).get("data")
    if state != "success" or not metrics or not metrics.get("run"):
        return SweepRun(name, knobs, state)
    if isinstance(metrics.get("knobs"), dict):
        knobs = metrics["knobs"]
    score = metrics.get(metric)  # the first eval split's figures are at the file's top
    if not isinstance(score, int | float) or not math.isfinite(score):
        return SweepRun(name, knobs)
    return SweepRun(name, knobs, split=metrics.get("split"), score=float(score),
                    low=float(metrics.get(f"{metric}_min", score)),
                    high=float(metrics.get(f"{metric}_max", score)),
                    seeds=len(metrics.get("by_seed") or {}),
                    majority=metrics.get(f"majority_{metric}"))
