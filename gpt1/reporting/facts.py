"""What ran, for the report's first screen: the preset params.yaml matches, whether the data is
the bundled sample, and each stage's wall time from its record."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from gpt1.machine import compute_line, placement_line
from gpt1.presets.edit import available, load_preset

# `ingest.root` as the bundled sample lies in a checkout (the package's own folder)
SAMPLE_ROOT = ("gpt1", "sample_data")
# the commands that take the pipeline to real data (README, docs/data.md)
REAL_DATA_COMMAND = "gpt1 set ingest.root=../shared/data && gpt1 preset books && dvc repro"


def is_sample(root: str | Path, cwd: Path = Path()) -> bool:
    """Whether `ingest.root` (relative to `cwd`, the checkout) is the bundled synthetic sample."""
    return (cwd / root).resolve().parts[-2:] == SAMPLE_ROOT


def leaves(tree: dict, prefix: str = "") -> dict[str, Any]:
    """`{"a": {"b": 1}}` -> `{"a.b": 1}`: a nested mapping's leaves by dotted key (a list is a
    leaf)."""
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            flat |= leaves(value, f"{prefix}{key}.")
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _lookup(tree: dict, dotted: str) -> tuple[bool, Any]:
    node: Any = tree
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False, None
        node = node[part]
    return True, node


def _same(ours: Any, theirs: Any) -> bool:
    """Equal as YAML values: 1.0e-3 is 0.001, an int equals the same float."""
    if isinstance(ours, list) and isinstance(theirs, list):
        return len(ours) == len(theirs) and all(map(_same, ours, theirs))
    if isinstance(ours, bool) or isinstance(theirs, bool):
        return ours is theirs
    if isinstance(ours, int | float) and isinstance(theirs, int | float):
        return float(ours) == float(theirs)
    return ours == theirs


@dataclass(frozen=True)
class PresetMatch:
    """The bundled preset a params tree matches: `name` when every key it sets matches
    (`differences` empty), else the closest one, its keys that differ: key -> (ours, the
    preset's)."""

    name: str
    differences: dict[str, tuple[Any, Any]]

    @property
    def exact(self) -> bool:
        return not self.differences

    def describe(self) -> str:
        if self.exact:
            return self.name
        shown = ", ".join(f"{key} {ours!r} (preset: {theirs!r})"
                          for key, (ours, theirs) in list(self.differences.items())[:6])
        more = len(self.differences) - 6
        return (f"custom: closest to {self.name}, which differs in {shown}"
                + (f" and {more} more" if more > 0 else ""))


def infer_preset(raw: dict, presets: dict[str, dict] | None = None) -> PresetMatch | None:
    """The preset `raw` (params.yaml as read) matches: one whose every key has the value it
    sets (the one setting the most keys, where several do), else the one with the fewest keys
    that differ. `presets`: name -> its keys (default: the bundled ones). None without any."""
    if presets is None:
        presets = {name: load_preset(name) for name in available()}
    matches = []
    for name, preset in presets.items():
        wanted = leaves(preset)
        differences = {}
        for key, value in wanted.items():
            found, ours = _lookup(raw, key)
            if not found or not _same(ours, value):
                differences[key] = (ours, value)
        matches.append((len(differences), -len(wanted), name, differences))
    if not matches:
        return None
    _, _, name, differences = min(matches, key=lambda m: m[:3])
    return PresetMatch(name, differences)


def stage_times(records: list[dict[str, Any]], stages: list[str]) -> pl.DataFrame:
    """A row per stage of `stages` with a record, in their order: seconds, when it finished,
    the commit; records of stages not among them (since removed from params) left out."""
    frame = pl.DataFrame(records, schema={"stage": pl.Utf8, "seconds": pl.Float64,
                                          "finished": pl.Utf8, "commit": pl.Utf8,
                                          "uncommitted_changes": pl.Boolean}, orient="row")
    order = pl.DataFrame({"stage": stages, "order": range(len(stages))})
    return frame.join(order, on="stage").sort("order").drop("order")


def duration(seconds: float) -> str:
    """`75.3` -> `1 min 15 s`; under a minute `12.5 s`."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {rest:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def where_trained(pretrain: dict[str, Any], finetune: dict[str, dict[str, Any]]
                  ) -> list[tuple[str, str]]:
    """Where pretraining and fine-tuning computed, as their metrics files record it
    (`compute`), not as the machine that builds the report would: a run may pretrain on GPUs
    and be reported on a laptop that pulled its files. `finetune` maps task -> metrics file;
    tasks fine-tuned on different machines or settings are listed under each line."""
    if not pretrain.get("run"):
        pretrained = f"not run: {pretrain.get('reason')}"
    elif "source" in pretrain:
        pretrained = f"not here: the model was imported (pretrain.source {pretrain['source']})"
    elif "compute" in pretrain:
        pretrained = compute_line(pretrain["compute"])
    else:
        pretrained = "not recorded in its metrics file"
    lines: dict[str, list[str]] = {}
    for task, metrics in finetune.items():
        if metrics.get("run"):
            record = metrics.get("compute")
            line = compute_line(record) if record else "not recorded in its metrics file"
            if record and record["machine"] == pretrain.get("compute", {}).get("machine"):
                line = f"{placement_line(record)}; the same machine"
            lines.setdefault(line, []).append(task)
    if not lines:
        finetuned = "no task fine-tuned"
    elif len(lines) == 1:
        (finetuned,) = lines
    else:
        finetuned = "; ".join(f"{', '.join(tasks)}: {line}" for line, tasks in lines.items())
    return [("pretraining", pretrained), ("fine-tuning", finetuned)]
