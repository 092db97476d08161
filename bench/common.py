"""What every benchmark shares: alternating repetitions, medians, the printed table, the JSON."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from gpt1.atomic import atomic_file
from gpt1.config import Params, load_params
from gpt1.machine import machine, machine_line  # bench.pages reads the line from here too
from gpt1.presets.edit import apply_preset

REPO = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results"
# the real data: ../shared/data beside the checkout, or the folder GPT1_SHARED_DATA names (as
# for the tests), so that a benchmark run from a clone elsewhere finds it
DATA = Path(os.environ.get("GPT1_SHARED_DATA", REPO.parent / "shared" / "data"))


def preset_params(preset: str | None) -> Params:
    """params.yaml, with preset `preset` applied as `gpt1 preset` applies it (none: as it is)."""
    if preset is None:
        return load_params(REPO / "params.yaml")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "params.yaml"
        shutil.copy(REPO / "params.yaml", path)
        apply_preset(preset, path)
        return load_params(path)


def parser(description: str) -> argparse.ArgumentParser:
    """The options every benchmark takes; a benchmark adds its own."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--repeats", type=int, default=5, help="repetitions of each side (median)")
    p.add_argument("--tiny", action="store_true", help="tiny sizes: a smoke run, not a measure")
    p.add_argument("--out", type=Path, default=RESULTS, help="where <name>.json is written")
    return p


def round_orders(names: Sequence[str], repeats: int) -> list[list[str]]:
    """The sides' order in each of `repeats` rounds: round r starts with side r mod n and takes
    the rest in turn, so that no side always runs first, or always right after the same one."""
    names = list(names)
    return [names[r % len(names):] + names[:r % len(names)] for r in range(repeats)]


def alternate(sides: dict[str, Callable[[], float]], repeats: int,
              warmup: bool = False) -> dict[str, list[float]]:
    """Call each side in turn, `repeats` rounds in `round_orders`: ours and the baseline see the
    same machine state (other load, thermal and cache effects) rather than one running after the
    other. With `warmup`, each side is first called once untimed and its value dropped, so that
    first-call costs (CUDA's lazily loaded modules, kernel choice, the allocator's first blocks,
    a compilation) fall in no side's figures rather than in the first round's first side's."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    if warmup:
        for run in sides.values():
            run()
    values: dict[str, list[float]] = {name: [] for name in sides}
    for order in round_orders(list(sides), repeats):
        for name in order:
            values[name].append(float(sides[name]()))
    return values


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


@dataclass
class Table:
    """Rows of one benchmark: a metric per column; `targets` say what each ratio should reach."""

    name: str
    columns: list[str]
    rows: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, **row: Any) -> None:
        unknown = set(row) - set(self.columns)
        if unknown:
            raise KeyError(f"{self.name}: columns {sorted(unknown)} not in {self.columns}")
        self.rows.append(row)

    def render(self) -> str:
        cells = [[_fmt(row.get(c)) for c in self.columns] for row in self.rows]
        widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(self.columns)]
        lines = [" | ".join(c.ljust(w) for c, w in zip(self.columns, widths, strict=True)),
                 "-+-".join("-" * w for w in widths)]
        lines += [" | ".join(v.rjust(w) for v, w in zip(r, widths, strict=True)) for r in cells]
        return "\n".join([f"## {self.name}", *lines, *self.notes])


def _fmt(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 100 else f"{value:,.0f}"
    return str(value)


def provenance() -> dict[str, Any]:
    """The code measured and when: the checkout's commit (None outside a git checkout), whether
    its tracked files had uncommitted changes (other than earlier results: `make bench` rewrites
    them one benchmark after another), and today's UTC date (what `bench.pages` shows)."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", *args], cwd=Path(__file__).parent, capture_output=True,
                                  text=True, check=True)
        except (OSError, subprocess.CalledProcessError):
            return None
        return done.stdout.strip()

    commit = git("rev-parse", "HEAD")
    status = (git("status", "--porcelain", "--untracked-files=no", "--", ":(top)",
                  ":(top,exclude)bench/results") if commit else None)
    return {"commit": commit, "dirty": bool(status),
            "date": datetime.datetime.now(datetime.UTC).date().isoformat()}


def publish(tables: list[Table], out_dir: Path, name: str, settings: dict[str, Any],
            code: dict[str, Any] | None = None, show: bool = True) -> Path:
    """Print the machine's line and `tables` (unless not `show`), and write them with
    `settings`, the machine, the commit and the date to `out_dir/<name>.json`: figures compare
    only with figures of the same capability, and `python -m bench.pages` puts them on
    docs/benchmarks.md. `code` replaces this checkout's `provenance()` where the code measured is
    another's (a clone's). A benchmark that runs in parts publishes after each, so that one cut
    short (a GPU lease's time limit) keeps what it measured."""
    info = machine()
    if show:
        print(machine_line(info), end="\n\n")
        for table in tables:
            print(table.render(), end="\n\n", flush=True)
    result = {"benchmark": name, **(code or provenance()), "settings": settings, "machine": info,
              "tables": [{"name": t.name, "columns": t.columns, "rows": t.rows, "notes": t.notes}
                         for t in tables]}
    path = out_dir / f"{name}.json"
    with atomic_file(path) as tmp:
        tmp.write_text(json.dumps(result, indent=2) + "\n")
    if show:
        print(f"written {path}")
    return path


def write_encoded(path: Path, examples: list[list[list[int]]], targets: np.ndarray) -> None:
    """A task's encoded examples (token ids per sequence of each example) and their targets, in
    one Parquet file: what a GPU machine without spaCy reads instead of cleaning the text."""
    table = pa.table({"sequences": pa.array(examples, type=pa.list_(pa.list_(pa.int32()))),
                      "target": pa.array(targets)})
    pq.write_table(table, path)


def read_encoded(path: Path) -> tuple[list[list[list[int]]], np.ndarray]:
    """What `write_encoded` wrote."""
    table = pq.read_table(path)
    # a copy: Arrow's buffer is read-only, and torch warns on tensors made from such arrays
    return table.column("sequences").to_pylist(), table.column("target").to_numpy().copy()
