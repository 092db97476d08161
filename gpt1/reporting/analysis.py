"""The paper's evidence (§5) in the report: Table 5's ablations, Figure 2's layers transferred
(left) and zero-shot behaviour over pretraining (right), ours beside the paper's. The figures
come from the run's long table aggregated over seeds (`gpt1.reporting.run`) and its pivots
(`gpt1.reporting.table`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import polars as pl

from gpt1.config import TaskParams
from gpt1.reporting.document import Bullets, Figure, Section, Table
from gpt1.reporting.paper import PAPER_TABLE5, PAPER_TABLE5_AVERAGE
from gpt1.reporting.plots import LINE_STYLES, Band, Bar, TrunkCurves
from gpt1.reporting.run import Run
from gpt1.reporting.table import (
    full_against_no_pretrain,
    headlines,
    table5,
    transfer_medians,
    zero_shot_scores,
)

__all__ = ["PAPER_TABLE5", "PAPER_TABLE5_AVERAGE"]  # the paper's figures, beside ours here

VARIANT_NAMES = {"full": "Transformer w/ aux LM (full)",  # Table 5's row names
                 "no_pretrain": "Transformer w/o pre-training",
                 "no_aux": "Transformer w/o aux LM",
                 "lstm": "LSTM w/ aux LM"}
TRUNK_NAMES = {"gpt1": "Transformer", "lstm": "LSTM"}  # zero-shot trunks, in the plot's order
METRIC_ABBREVIATIONS = {"accuracy": "acc", "mcc": "mc", "f1": "F1", "pearson": "pc"}  # Table 5's


def _stop(text: str) -> str:
    """`text` ending in a full stop, one only."""
    return text if text.endswith(".") else f"{text}."


def _nothing_ran(reasons: Iterable[str], empty: str) -> str:
    reasons = list(dict.fromkeys(reasons))
    return _stop(f"Nothing ran: {'; '.join(reasons)}") if reasons else empty


def _skipped(run: Run, stage: str) -> pl.DataFrame:
    return run.results.skipped.filter(pl.col("stage") == stage)


def _points(value: float) -> str:
    return f"{value:+.1f} points"


def _seeds(seeds: list[int]) -> str:
    return ", ".join(map(str, seeds))


def _trained_on(size: int | None) -> str:
    return "" if size is None else f" ({size:,} train)"


def _abbreviation(task: TaskParams) -> str:
    return METRIC_ABBREVIATIONS.get(task.metrics[0], task.metrics[0])


# --- Table 5 ---------------------------------------------------------------------------------

def ablation_columns(run: Run, tasks: list[str]) -> list[tuple[str, int | None]]:
    """Table 5's columns: each task (in `tasks`' order) at each train size any variant ran it
    at, in the order they ran; (task, None) for a task that ran at none."""
    ran = headlines(run.summary, run.tasks, "ablation")
    columns: list[tuple[str, int | None]] = []
    for task in tasks:
        sizes = ran.filter(pl.col("task") == task)["train_size"].unique(maintain_order=True)
        columns += [(task, int(size)) for size in sizes] or [(task, None)]
    return columns


def ablation_table(run: Run, variants: list[str], tasks: list[str]) -> Table:
    """A row per variant, a column per task and train size ("median [min, max]" over seeds,
    from the Table 5 pivot), the paper's figure beside each task Table 5 has."""
    ours = table5(run.summary, run.tasks)
    cells = {row["variant"]: row for row in ours.iter_rows(named=True)}
    header, rows = ["variant"], {variant: [VARIANT_NAMES[variant]] for variant in variants}
    for task in tasks:
        spec = run.tasks[task]
        for name, size in ablation_columns(run, [task]):
            header.append(f"{spec.title} {_abbreviation(spec)}{_trained_on(size)}")
            for variant in variants:
                reason = run.skipped("ablation", name, variant)
                found = cells.get(variant, {}).get(f"{name}|{size}")
                rows[variant].append(f"not run: {reason}" if reason is not None
                                     else found or "n/a")
        if task in PAPER_TABLE5["full"]:
            header.append(f"paper {spec.title} {_abbreviation(spec)}")
            for variant in variants:
                rows[variant].append(f"{PAPER_TABLE5[variant][task]:.1f}")
    return Table(header, list(rows.values()))


def table5_bars(run: Run, variants: list[str]) -> tuple[dict[str, dict[str, Bar]],
                                                        dict[str, dict[str, float]]]:
    """The Table 5 chart's groups: ours, `<task> <size>` -> variant -> (median, min, max); the
    paper's, `<task>` -> variant -> figure, for the tasks Table 5 has."""
    ours: dict[str, dict[str, Bar]] = {}
    for row in headlines(run.summary, run.tasks, "ablation").iter_rows(named=True):
        if row["variant"] in variants:
            title = f"{run.tasks[row['task']].title}\n{row['train_size']:,} train"
            ours.setdefault(title, {})[VARIANT_NAMES[row["variant"]]] = (
                row["median"], row["min"], row["max"])
    tasks = dict.fromkeys(row["task"] for row in headlines(run.summary, run.tasks, "ablation")
                          .iter_rows(named=True))
    paper = {run.tasks[t].title: {VARIANT_NAMES[v]: PAPER_TABLE5[v][t] for v in variants}
             for t in tasks if t in PAPER_TABLE5["full"]}
    return ours, paper


def pretraining_verdicts(run: Run, variants: list[str], tasks: list[str]) -> list[Any]:
    """Per task and train size: whether `full` beats `no_pretrain`, by how many points (medians
    over seeds), and whether their spreads over seeds overlap."""
    if "full" not in variants or "no_pretrain" not in variants:
        return ["Pre-training's effect: needs both `full` and `no_pretrain` in "
                "analysis.ablation.variants."]
    lines = []
    pairs = full_against_no_pretrain(run)
    for task in tasks:
        spec = run.tasks[task]
        missing = [(v, reason) for v in ("full", "no_pretrain")
                   if (reason := run.skipped("ablation", task, v)) is not None]
        if missing:
            why = "; ".join(f"{v} not run ({reason})" for v, reason in missing)
            lines.append(f"{spec.title}: no comparison, {why}.")
            continue
        for name, size, ours, theirs in pairs:
            if name != task:
                continue
            gain = ours["median"] - theirs["median"]
            apart = ours["min"] > theirs["max"] or theirs["min"] > ours["max"]
            lines.append(
                f"{spec.title}{_trained_on(size)}: full "
                f"{'beats' if gain > 0 else 'does not beat'} no_pretrain, {_points(gain)} "
                f"({ours['median']:.1f} against {theirs['median']:.1f}, medians over seeds "
                f"{_seeds(ours['seeds'])}; the spreads "
                f"{'do not overlap' if apart else 'overlap'}).")
    return ["Does pre-training help? `full` against `no_pretrain` (the paper: 14.8 points lower "
            "on average without pre-training, lower on every task):", Bullets(lines)]


def ablation_section(run: Run, variants: list[str], tasks: list[str]) -> Section:
    """Table 5: the chart, a row per variant (params order) and a column per task and train
    size, the paper's figure beside each task Table 5 has; then whether pre-training helps."""
    section = Section("table5", "Ablations (Table 5)")
    skipped = _skipped(run, "ablation")
    if headlines(run.summary, run.tasks, "ablation").is_empty():
        configured = "No ablation configured." if not tasks else "Nothing ran."
        section.blocks.append(_nothing_ran(skipped["reason"], configured))
        return section
    averages = ", ".join(f"{VARIANT_NAMES[v]} {a}" for v, a in PAPER_TABLE5_AVERAGE.items())
    if "table5" in run.plots:
        section.blocks.append(Figure(run.plots["table5"], "Table 5 chart",
                                     "Ours (median, min-max over seeds) beside the paper's.",
                                     width="900px"))
    section.blocks += [
        ablation_table(run, variants, tasks),
        "Ours: the median [min, max] over seeds on each task's dev split, every variant "
        "fine-tuned on the same examples with the same seeds. The paper's (Radford et al. 2018, "
        f"Table 5): each task's full training set; its averages over the eight columns: "
        f"{averages}.",
        *pretraining_verdicts(run, variants, tasks)]
    return section


# --- Figure 2, left ----------------------------------------------------------------------------

def _label(run: Run, task: str, size: int | None) -> str:
    spec = run.tasks[task]
    return f"{spec.title} {spec.metrics[0]}{_trained_on(size)}"


def transfer_curves(run: Run) -> dict[str, list[Band]]:
    """Figure 2 (left)'s lines: per task that ran, (k, median, min, max) of its headline metric
    for each number k of pretrained layers transferred."""
    curves: dict[str, list[Band]] = {}
    rows = headlines(run.summary, run.tasks, "transfer").sort("layers", maintain_order=True)
    for row in rows.iter_rows(named=True):
        curves.setdefault(_label(run, row["task"], row["train_size"]), []).append(
            (row["layers"], row["median"], row["min"], row["max"]))
    return curves


def transfer_section(run: Run, tasks: list[str]) -> Section:
    """Figure 2 (left): the plot, a row per task of medians by layers transferred (the pivot),
    and what transferring every layer gains over transferring none."""
    section = Section("transfer", "Layers transferred (Figure 2, left)")
    medians = transfer_medians(run.summary, run.tasks)
    if medians.height == 0:
        section.blocks.append(_nothing_ran(_skipped(run, "transfer")["reason"],
                                           "No transfer task configured."))
        return section
    ks = sorted(int(c) for c in medians.columns if c != "task")
    by_task = {row["task"]: row for row in medians.iter_rows(named=True)}
    rows, gains = [], []
    for task in tasks:
        spec = run.tasks[task]
        if (reason := run.skipped("transfer", task)) is not None:
            rows.append([spec.title, f"not run: {reason}", *("" for _ in ks)])
            continue
        figures = {k: by_task[task][str(k)] for k in ks if by_task[task][str(k)] is not None}
        size = run.figure("transfer", task, spec.metrics[0], spec.eval_splits[0],
                          layers=min(figures))["train_size"]
        seeds = run.figure("transfer", task, spec.metrics[0], spec.eval_splits[0],
                           layers=min(figures))["seeds"]
        label = _label(run, task, size)
        rows.append([label, spec.eval_splits[0],
                     *(f"{figures[k]:.1f}" if k in figures else "" for k in ks)])
        n = max(figures)
        if 0 in figures and n > 0:
            gains.append(f"{label}: all {n} layers against none: "
                         f"{_points(figures[n] - figures[0])} (medians over seeds "
                         f"{_seeds(seeds)}).")
    if "transfer" in run.plots:
        section.blocks.append(Figure(run.plots["transfer"], "layers transferred",
                                     width="620px"))
    section.blocks += [
        Table(["task", "split", *(f"k={k}" for k in ks)], rows, left=2),
        "k: the pretrained layers a model starts from before fine-tuning (k >= 1: the "
        "embeddings and the first k blocks; k = 0: nothing pretrained), the rest freshly "
        "initialised. Medians over seeds of the headline metric; the plot shades min to max. "
        "The paper (Figure 2, left; RACE and MultiNLI, 12 layers): every layer helps, full "
        "transfer up to 9 points on MultiNLI."]
    if gains:
        section.blocks.append(Bullets(gains))
    return section


# --- Figure 2, right ---------------------------------------------------------------------------

def normalise(score: float, chance: float, reference: float) -> float:
    """Figure 2 (right)'s scale: 0 at chance, 1 at `reference`."""
    return (score - chance) / (reference - chance)


def _chance(run: Run, task: str) -> float:
    return run.results.values.filter((pl.col("stage") == "zero_shot") & (pl.col("task") == task)
                                     & (pl.col("variant") == "chance"))["value"][0]


def finetuned_figure(run: Run, task: str) -> float | None:
    """Our fine-tuned median of a zero-shot task's metric on its split, where that ran."""
    entry = run.data.zero_shot[task]
    row = run.figure("finetune", task, entry["metric"], entry["split"],
                     train_size=_finetune_size(run, task))
    return None if row is None else row["median"]


def _finetune_size(run: Run, task: str) -> int | None:
    result = run.data.finetune.get(task)
    return result["train_examples"] if result is not None and result["run"] else None


def _reference(run: Run, task: str) -> float | None:
    """The fine-tuned figure to normalise by: none unless above chance."""
    figure = finetuned_figure(run, task)
    return figure if figure is not None and figure > _chance(run, task) else None


def _trunk_order(run: Run) -> list[str]:
    """The scored trunks, the Transformer first, then the LSTM, then any other."""
    scored = run.results.values.filter((pl.col("stage") == "zero_shot")
                                       & pl.col("step").is_not_null())
    trunks = list(scored["variant"].unique(maintain_order=True))
    return [t for t in TRUNK_NAMES if t in trunks] + [t for t in trunks if t not in TRUNK_NAMES]


def zero_shot_curves(run: Run) -> tuple[TrunkCurves, TrunkCurves]:
    """Figure 2 (right)'s lines, trunk -> task -> (step, value): normalised by our fine-tuned
    figure (tasks with one above chance), and in points above chance (every task scored)."""
    normalised: TrunkCurves = {}
    above: TrunkCurves = {}
    scores = zero_shot_scores(run.results.values)
    tasks = [c for c in scores.columns if c not in ("variant", "step")]
    for trunk in _trunk_order(run):
        name = TRUNK_NAMES.get(trunk, trunk)
        normalised[name], above[name] = {}, {}
        rows = scores.filter(pl.col("variant") == trunk)
        for task in tasks:
            points = [(s, v) for s, v in zip(rows["step"], rows[task], strict=True)
                      if v is not None]
            if not points:
                continue
            title, chance = run.tasks[task].title, _chance(run, task)
            above[name][title] = [(step, score - chance) for step, score in points]
            reference = _reference(run, task)
            if reference is not None:
                normalised[name][title] = [(step, normalise(score, chance, reference))
                                           for step, score in points]
    return normalised, above


def zero_shot_section(run: Run, tasks: list[str]) -> Section:
    """Figure 2 (right): the plot, the raw scores by trunk and step (the pivot), and per task
    the chance and fine-tuned figures the plot normalises by (with the last step's normalised
    score)."""
    section = Section("zero-shot", "Zero-shot behaviour over pretraining (Figure 2, right)")
    ran = [t for t in tasks if run.skipped("zero_shot", t) is None]
    if not ran:
        section.blocks.append(_nothing_ran(_skipped(run, "zero_shot")["reason"],
                                           "No zero-shot task configured."))
        return section
    entries = run.data.zero_shot
    scores = zero_shot_scores(run.results.values)
    trunks = _trunk_order(run)
    if not trunks:
        section.blocks.append("No pretraining snapshot to score: the model was not pretrained "
                              "here (an imported model keeps none), or pretrain.snapshots is "
                              "empty.")
        return section
    scored = [t for t in ran if t in scores.columns]
    raw = [[TRUNK_NAMES.get(row["variant"], row["variant"]), f"{row['step']:,}",
            *("" if row[t] is None else f"{row[t]:.1f}" for t in scored)]
           for trunk in trunks for row in scores.filter(pl.col("variant") == trunk)
           .iter_rows(named=True)]
    last = {trunk: scores.filter(pl.col("variant") == trunk).tail(1).row(0, named=True)
            for trunk in trunks}
    references, unscaled = [], []
    for task in ran:
        entry, spec = entries[task], run.tasks[task]
        figure, reference = finetuned_figure(run, task), _reference(run, task)
        if reference is None:
            unscaled.append(spec.title)
        examples = f"{entry['examples']:,}" + (f" (+{entry['train_examples']:,} train)"
                                               if "train_examples" in entry else "")
        chance = _chance(run, task)
        scaled = [f"{normalise(row[task], chance, reference):.2f}"
                  if reference is not None and row.get(task) is not None else "n/a"
                  for row in last.values()]
        references.append([spec.title, entry["heuristic"], f"{entry['split']} {entry['metric']}",
                           examples, f"{chance:.1f}", "n/a" if figure is None else f"{figure:.1f}",
                           *scaled])
    names = [TRUNK_NAMES.get(t, t) for t in trunks]
    styles = "; ".join(f"{style}: {trunk}" for style, trunk in zip(LINE_STYLES, names,
                                                                   strict=False))
    if "zero_shot" in run.plots:
        section.blocks.append(Figure(run.plots["zero_shot"], "zero-shot behaviour",
                                     width="1000px"))
    section.blocks += [
        "Each task answered by the pretrained language model alone, no fine-tuning, at every "
        "pretraining snapshot (x: pretraining updates on a symlog axis, step 0 the untrained "
        "model). Left: (score - chance) / (fine-tuned - chance), 0 at chance and 1 at our "
        "fine-tuned model's dev figure (the paper divides by the single-model state of the art "
        "instead). Right: points above chance, every task"
        + (f", {', '.join(unscaled)} there alone (no fine-tuned figure above chance)"
           if unscaled else "")
        + f". One colour per task; {styles}.",
        Table(["trunk", "step", *(f"{run.tasks[t].title} {entries[t]['metric']}"
                                  for t in scored)], raw, left=1),
        Table(["task", "heuristic", "scored on", "examples", "chance", "fine-tuned (ours)",
               *(f"{TRUNK_NAMES.get(t, t)}, step {row['step']:,}, normalised"
                 for t, row in last.items())], references, left=3)]
    missing = [_stop(f"{run.tasks[t].title}: not run: {run.skipped('zero_shot', t)}")
               for t in tasks if t not in ran]
    if missing:
        section.blocks.append(Bullets(missing))
    return section


def analysis_sections(run: Run, variants: list[str], ablation_tasks: list[str],
                      transfer_tasks: list[str], zero_shot_tasks: list[str]) -> list[Section]:
    """The report's sections for the paper's §5: Table 5, then Figure 2 left and right."""
    return [ablation_section(run, variants, ablation_tasks),
            transfer_section(run, transfer_tasks),
            zero_shot_section(run, zero_shot_tasks)]
