"""A task's fine-tuning knobs swept as DVC experiments. `gpt1 sweep <task> lr=a,b epochs=c,d`
checks the grid against params.yaml (`parse_grid`) and queues it as one `dvc exp run --queue` of
`finetune@<task>` (`queue_command`), whose `-S` lists DVC expands into one experiment per
point; DVC's queue runs them (`dvc queue start -j N`). `gpt1 sweep <task> --show` reads
`dvc exp show --json` and sets each experiment's dev score beside the majority class, the
spread over seeds and the best marked (`sweep_table`). Nothing here imports DVC or runs an
experiment: the experiments are DVC's own."""

from __future__ import annotations

import math
import os
from itertools import product
from typing import Any

import polars as pl
from pydantic import ValidationError

from gpt1.config import FinetuneKnobs, Params, ParamsError, parse_params
from gpt1.errors import InputError
from gpt1.presets.edit import parse_assignments

PARAMS_FILE = "params.yaml"


def parse_grid(params: Params, task: str, assignments: list[str]) -> dict[str, list[Any]]:
    """`["lr=0.0005,0.001", "epochs=2,3"]` -> `{"lr": [0.0005, 0.001], "epochs": [2, 3]}`:
    each key a knob of `finetune.train` (a task override), each value read as YAML and checked
    as the task's override would be. Refused before anything is queued, in one line: a task not
    fine-tuned, an unknown key, a key given twice, an empty list, a value of the wrong type."""
    params.task(task)  # bad input, naming the registry, where it has no such task
    if task not in params.requested_tasks():
        raise InputError(f"task {task!r} is not fine-tuned (finetune.tasks: "
                         f"{params.finetune.tasks}): add it, e.g. gpt1 set "
                         f"'finetune.tasks=[{', '.join([*params.requested_tasks(), task])}]'")
    if not assignments:
        raise InputError("give the grid as KEY=VALUE,VALUE... (e.g. lr=0.0005,0.001 epochs=2,3)")
    grid: dict[str, list[Any]] = {}
    for item in assignments:
        key, sep, values = item.partition("=")
        if not sep:
            raise InputError(f"{item!r}: expected KEY=VALUE,VALUE... (e.g. lr=0.0005,0.001)")
        if key not in FinetuneKnobs.model_fields:
            raise InputError(f"{key!r}: not a fine-tuning knob (the knobs: "
                             f"{', '.join(FinetuneKnobs.model_fields)})")
        if key in grid:
            raise InputError(f"{key}: given twice; list its values once, comma-separated")
        texts = [text.strip() for text in values.split(",")]
        if not any(texts):
            raise InputError(f"{key}: no values; list them comma-separated ({key}=a,b)")
        if "" in texts:
            raise InputError(f"{key}={values}: an empty value between commas")
        read = [parse_assignments([f"{key}={text}"])[key] for text in texts]
        if len(set(map(repr, read))) != len(read):
            raise InputError(f"{key}={values}: a value listed twice")
        for value in read:
            _check_value(params, task, key, value)
        grid[key] = read
    return grid


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


def sweep_table(exp_show: list[dict[str, Any]], task: str, metric: str) -> pl.DataFrame:
    """The commits of `dvc exp show --json` and their experiments, a row each with the knobs of
    `task` that differ between them, its headline dev figure (`metric`, the task's first, on
    its first eval split: median [min, max] over seeds), the majority class and the best
    marked (each of those that tie); an experiment that failed or has not run shows none."""
    rows = []
    for commit in exp_show:
        if commit.get("rev") == "workspace":
            continue
        rows.append(_row(commit.get("name") or commit["rev"][:7], commit.get("data"), task,
                         metric))
        for experiment in commit.get("experiments") or []:
            for rev in experiment.get("revs", []):
                rows.append(_row(rev.get("name") or rev["rev"][:7], rev.get("data"), task,
                                 metric))
    if not rows:
        raise InputError("no commit or experiment found: run gpt1 sweep in a git checkout")
    known = [r["knobs"] for r in rows if r["knobs"]]  # a queued or failed one has none
    knobs = [key for key in FinetuneKnobs.model_fields
             if len({repr(k.get(key)) for k in known}) > 1]
    scores = [r["score"] for r in rows if r["score"] is not None]
    best = max(scores) if scores else None
    split = next((r["split"] for r in rows if r["split"]), "dev")
    return pl.DataFrame([{
        "experiment": r["name"],
        **{key: r["knobs"].get(key) for key in knobs},
        f"{metric} ({split})": "" if r["score"] is None else
        f"{r['score']:.1f}" + ("" if r["seeds"] <= 1 else f" [{r['low']:.1f}, {r['high']:.1f}]"),
        "seeds": r["seeds"],
        "majority class": "" if r["majority"] is None else f"{r['majority']:.1f}",
        "best": "*" if r["score"] is not None and r["score"] == best else "",
    } for r in rows], infer_schema_length=None)


def _row(name: str, data: dict[str, Any] | None, task: str, metric: str) -> dict[str, Any]:
    """One commit's or experiment's knobs for `task` and its figures of `metric` (None where
    its metrics file for the task is absent: not run, failed, queued). The knobs are those its
    metrics file says the run trained with, else (not run yet) those its params.yaml gives.
    DVC's JSON keeps a metrics file's numbers and mappings, not its lists: the seeds are
    counted from `by_seed`."""
    row: dict[str, Any] = {"name": name, "knobs": {}, "split": None, "score": None,
                           "low": None, "high": None, "seeds": 0, "majority": None}
    if not data:
        return row
    raw = ((data.get("params") or {}).get(PARAMS_FILE) or {}).get("data")
    if raw:
        try:
            params = parse_params(raw)
        except ParamsError:  # an experiment of params this code no longer reads: no knobs
            params = None
        if params is not None and task in params.tasks:
            knobs = params.finetune.for_task(params.tasks[task], params.finetune.seeds[0])
            row["knobs"] = knobs.model_dump(exclude={"seed"})
    metrics = ((data.get("metrics") or {}).get(f"metrics/finetune/{task}.json") or {}).get("data")
    if not metrics or not metrics.get("run"):
        return row
    if isinstance(metrics.get("knobs"), dict):
        row["knobs"] = metrics["knobs"]
    score = metrics.get(metric)  # the first eval split's figures are at the file's top
    if isinstance(score, int | float) and math.isfinite(score):
        row.update(split=metrics.get("split"), score=float(score),
                   low=float(metrics.get(f"{metric}_min", score)),
                   high=float(metrics.get(f"{metric}_max", score)),
                   seeds=len(metrics.get("by_seed") or {}),
                   majority=metrics.get(f"majority_{metric}"))
    return row
