"""The paper's evidence (§5) in the report: Table 5's ablations, Figure 2's layers transferred
(left) and zero-shot behaviour over pretraining (right), ours beside the paper's."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gpt1.config import TaskParams
from gpt1.reporting.plots import LINE_STYLES, Band, TrunkCurves
from gpt1.reporting.report import Result, median_spread

# Radford et al. 2018, Table 5 ("Analysis of various model ablations on different tasks"):
# variant -> registry task -> the paper's figure (CoLA mc, SST-2 acc, MRPC F1, STS-B pc, QQP F1,
# MNLI acc, QNLI acc, RTE acc), each model fine-tuned on the task's full training set; then each
# variant's unweighted average over those eight columns.
PAPER_TABLE5: dict[str, dict[str, float]] = {
    "full": {"cola": 45.4, "sst2": 91.3, "mrpc": 82.3, "stsb": 82.0, "qqp": 70.3, "mnli": 81.8,
             "qnli": 88.1, "rte": 56.0},
    "no_pretrain": {"cola": 18.9, "sst2": 84.0, "mrpc": 79.4, "stsb": 30.9, "qqp": 65.5,
                    "mnli": 75.7, "qnli": 71.2, "rte": 53.8},
    "no_aux": {"cola": 47.9, "sst2": 92.0, "mrpc": 84.9, "stsb": 83.2, "qqp": 69.8, "mnli": 81.1,
               "qnli": 86.9, "rte": 54.4},
    "lstm": {"cola": 30.3, "sst2": 90.5, "mrpc": 83.2, "stsb": 71.8, "qqp": 68.1, "mnli": 73.7,
             "qnli": 81.1, "rte": 54.6},
}
PAPER_TABLE5_AVERAGE = {"full": 74.7, "no_pretrain": 59.9, "no_aux": 75.0, "lstm": 69.1}

VARIANT_NAMES = {"full": "Transformer w/ aux LM (full)",  # Table 5's row names
                 "no_pretrain": "Transformer w/o pre-training",
                 "no_aux": "Transformer w/o aux LM",
                 "lstm": "LSTM w/ aux LM"}
TRUNK_NAMES = {"gpt1": "Transformer", "lstm": "LSTM"}  # zero-shot trunks, in the plot's order
METRIC_ABBREVIATIONS = {"accuracy": "acc", "mcc": "mc", "f1": "F1", "pearson": "pc"}  # Table 5's


Size = int | None  # an ablation's train size: the first N train rows (None: all)


@dataclass(frozen=True)
class Analysis:
    """The analysis stages' metrics files, as the report reads them."""

    ablation: dict[str, dict[str, Result]]  # variant -> task -> metrics/ablation/<v>/<task>.json
    transfer: dict[str, Result]  # task -> metrics/transfer/<task>.json
    zero_shot: Result  # metrics/zero_shot/<task>.json, combined (tasks.report.combine_zero_shot)


def _row(cells: Iterable[str]) -> str:
    return f"| {' | '.join(cells)} |"


def _table(header: list[str], rows: list[list[str]], left: int = 1) -> list[str]:
    """A markdown table: its first `left` columns left-aligned, the others right-aligned."""
    rule = ["---"] * left + ["---:"] * (len(header) - left)
    return [_row(header), f"|{'|'.join(rule)}|", *(_row(r) for r in rows)]


def _stop(text: str) -> str:
    """`text` ending in a full stop, one only."""
    return text if text.endswith(".") else f"{text}."


def _nothing_ran(results: Iterable[Result], empty: str) -> str:
    reasons = list(dict.fromkeys(r["reason"] for r in results if not r["run"]))
    return _stop(f"Nothing ran: {'; '.join(reasons)}") if reasons else empty


def _headline(task: TaskParams, result: Result) -> dict[str, float]:
    """The median, min and max over seeds of the task's headline metric and dev split."""
    return result["dev"][task.eval_splits[0]][task.metrics[0]]


def _trained_on(runs: Iterable[Result]) -> str:
    """The train examples the first of `runs` (fine-tunings that ran) used, if any."""
    counts = [r["train_examples"] for r in runs]
    return f" ({counts[0]:,} train)" if counts else ""


def _points(value: float) -> str:
    return f"{value:+.1f} points"


def _seeds(run: Result) -> str:
    return ", ".join(map(str, run["seeds"]))


def _sizes(result: Result) -> dict[Size, Result]:
    """An ablation file's fine-tunings by train size (none where it did not run)."""
    return {s["max_train_examples"]: s for s in result["sizes"]} if result["run"] else {}


def _task_sizes(results: Iterable[Result]) -> list[Size]:
    """The train sizes any of a task's ablation files ran at, in their order."""
    return list(dict.fromkeys(size for result in results for size in _sizes(result)))


def _entry(task: TaskParams, result: Result, size: Size) -> str:
    if not result["run"]:
        return f"not run: {result['reason']}"
    run = _sizes(result).get(size)
    return "n/a" if run is None else median_spread(_headline(task, run))


def ablation_section(tasks: dict[str, TaskParams],
                     ablation: dict[str, dict[str, Result]]) -> list[str]:
    """Table 5: a row per variant, a column per task and train size ("median [min, max]" over
    seeds), the paper's figure beside each task Table 5 has; then whether pre-training helps."""
    head = ["## Ablations (Table 5)", ""]
    by_task = {name: {variant: ablation[variant][name] for variant in ablation}
               for name in next(iter(ablation.values()), {})}
    if not any(r["run"] for results in by_task.values() for r in results.values()):
        everything = (r for results in by_task.values() for r in results.values())
        return [*head, _nothing_ran(everything, "No ablation configured."), ""]
    header = ["variant"]
    rows = {variant: [VARIANT_NAMES[variant]] for variant in ablation}
    for name, results in by_task.items():
        task = tasks[name]
        metric = METRIC_ABBREVIATIONS.get(task.metrics[0], task.metrics[0])
        for size in _task_sizes(results.values()) or [None]:
            runs = [run for r in results.values() if (run := _sizes(r).get(size)) is not None]
            header.append(f"{task.title} {metric}{_trained_on(runs)}")
            for variant, result in results.items():
                rows[variant].append(_entry(task, result, size))
        if name in PAPER_TABLE5["full"]:
            header.append(f"paper {task.title} {metric}")
            for variant in results:
                rows[variant].append(f"{PAPER_TABLE5[variant][name]:.1f}")
    averages = ", ".join(f"{VARIANT_NAMES[v]} {a}" for v, a in PAPER_TABLE5_AVERAGE.items())
    return [
        *head, *_table(header, list(rows.values())), "",
        "Ours: the median [min, max] over seeds on each task's dev split, every variant fine-tuned "
        "on the same examples with the same seeds. The paper's (Radford et al. 2018, Table 5): "
        f"each task's full training set; its averages over the eight columns: {averages}.", "",
        *pretraining_verdicts(tasks, ablation), "",
    ]


def pretraining_verdicts(tasks: dict[str, TaskParams],
                         ablation: dict[str, dict[str, Result]]) -> list[str]:
    """Per task and train size: whether `full` beats `no_pretrain`, by how many points (medians
    over seeds), and whether their spreads over seeds overlap."""
    if "full" not in ablation or "no_pretrain" not in ablation:
        return ["Pre-training's effect: needs both `full` and `no_pretrain` in "
                "analysis.ablation.variants."]
    lines = ["Does pre-training help? `full` against `no_pretrain` (the paper: 14.8 points lower "
             "on average without pre-training, lower on every task):", ""]
    for name, full in ablation["full"].items():
        bare, task = ablation["no_pretrain"][name], tasks[name]
        missing = [(v, r["reason"]) for v, r in (("full", full), ("no_pretrain", bare))
                   if not r["run"]]
        if missing:
            why = "; ".join(f"{v} not run ({reason})" for v, reason in missing)
            lines.append(f"- {task.title}: no comparison, {why}.")
            continue
        for size in _task_sizes([full, bare]):
            pair = _sizes(full).get(size), _sizes(bare).get(size)
            if None in pair:
                continue
            ours, theirs = (_headline(task, run) for run in pair)
            gain = ours["median"] - theirs["median"]
            apart = ours["min"] > theirs["max"] or theirs["min"] > ours["max"]
            lines.append(
                f"- {task.title}{_trained_on(pair[:1])}: full "
                f"{'beats' if gain > 0 else 'does not beat'} no_pretrain, {_points(gain)} "
                f"({ours['median']:.1f} against {theirs['median']:.1f}, medians over seeds "
                f"{_seeds(pair[0])}; the spreads {'do not overlap' if apart else 'overlap'}).")
    return lines


def _label(task: TaskParams, result: Result) -> str:
    return f"{task.title} {task.metrics[0]}{_trained_on([result])}"


def _band(k: int, summary: dict[str, float]) -> Band:
    return (k, summary["median"], summary["min"], summary["max"])


def transfer_curves(tasks: dict[str, TaskParams],
                    transfer: dict[str, Result]) -> dict[str, list[Band]]:
    """Figure 2 (left)'s lines: per task that ran, (k, median, min, max) of its headline metric
    for each number k of pretrained layers transferred."""
    curves = {}
    for result in transfer.values():
        if result["run"] and result["layers"]:
            task = tasks[result["task"]]
            curves[_label(task, result)] = [_band(layer["k"], _headline(task, layer))
                                            for layer in result["layers"]]
    return curves


def transfer_section(tasks: dict[str, TaskParams], transfer: dict[str, Result],
                     plot: str | None) -> list[str]:
    """Figure 2 (left): the plot, a row per task of medians by layers transferred, and what
    transferring every layer gains over transferring none."""
    head = ["## Layers transferred (Figure 2, left)", ""]
    ran = [r for r in transfer.values() if r["run"]]
    if not ran:
        return [*head, _nothing_ran(transfer.values(), "No transfer task configured."), ""]
    ks = range(max(r["n_layer"] for r in ran) + 1)
    rows, gains = [], []
    for result in transfer.values():
        task = tasks[result["task"]]
        if not result["run"]:
            rows.append([task.title, f"not run: {result['reason']}", *("" for _ in ks)])
            continue
        medians = {layer["k"]: _headline(task, layer)["median"] for layer in result["layers"]}
        rows.append([_label(task, result), task.eval_splits[0],
                     *(f"{medians[k]:.1f}" if k in medians else "" for k in ks)])
        n = result["n_layer"]
        if 0 in medians and n in medians:
            gains.append(f"- {_label(task, result)}: all {n} layers against none: "
                         f"{_points(medians[n] - medians[0])} (medians over seeds "
                         f"{_seeds(result)}).")
    return [
        *head, *([f"![layers transferred]({plot})", ""] if plot else []),
        *_table(["task", "split", *(f"k={k}" for k in ks)], rows, left=2), "",
        "k: the pretrained layers a model starts from before fine-tuning (k >= 1: the embeddings "
        "and the first k blocks; k = 0: nothing pretrained), the rest freshly initialised. "
        "Medians over seeds of the headline metric; the plot shades min to max. The paper "
        "(Figure 2, left; RACE and MultiNLI, 12 layers): every layer helps, full transfer up to "
        "9 points on MultiNLI.", "",
        *gains, *([""] if gains else []),
    ]


def finetuned_figure(entry: Result, finetune: Result | None) -> float | None:
    """Our fine-tuned median of a zero-shot task's metric on its split, where that ran."""
    if finetune is None or not finetune["run"]:
        return None
    summary = finetune["dev"].get(entry["split"], {}).get(entry["metric"])
    return None if summary is None else summary["median"]


def normalise(score: float, chance: float, reference: float) -> float:
    """Figure 2 (right)'s scale: 0 at chance, 1 at `reference`."""
    return (score - chance) / (reference - chance)


def _reference(entry: Result, finetune: Result | None) -> float | None:
    """The fine-tuned figure to normalise by: none unless above chance."""
    figure = finetuned_figure(entry, finetune)
    return figure if figure is not None and figure > entry["chance"] else None


def _trunks(zero_shot: Result) -> dict[str, Result]:
    """The scored trunks, the Transformer first, then the LSTM, then any other."""
    trunks = zero_shot["trunks"]
    order = [t for t in TRUNK_NAMES if t in trunks] + [t for t in trunks if t not in TRUNK_NAMES]
    return {TRUNK_NAMES.get(t, t): trunks[t] for t in order}


def zero_shot_curves(tasks: dict[str, TaskParams], zero_shot: Result,
                     finetune: dict[str, Result]) -> tuple[TrunkCurves, TrunkCurves]:
    """Figure 2 (right)'s lines, trunk -> task -> (step, value): normalised by our fine-tuned
    figure (tasks with one above chance), and in points above chance (every task scored)."""
    normalised: TrunkCurves = {}
    above: TrunkCurves = {}
    for trunk, record in _trunks(zero_shot).items():
        normalised[trunk], above[trunk] = {}, {}
        for name, entry in zero_shot["tasks"].items():
            scores = record["scores"].get(name) if entry["run"] else None
            if not scores:
                continue
            title, chance = tasks[name].title, entry["chance"]
            points = list(zip(record["steps"], scores, strict=True))
            above[trunk][title] = [(step, score - chance) for step, score in points]
            reference = _reference(entry, finetune.get(name))
            if reference is not None:
                normalised[trunk][title] = [(step, normalise(score, chance, reference))
                                            for step, score in points]
    return normalised, above


def zero_shot_section(tasks: dict[str, TaskParams], zero_shot: Result,
                      finetune: dict[str, Result], plot: str | None) -> list[str]:
    """Figure 2 (right): the plot, the raw scores by trunk and step, and per task the chance and
    fine-tuned figures the plot normalises by (with the last step's normalised score)."""
    head = ["## Zero-shot behaviour over pretraining (Figure 2, right)", ""]
    entries = zero_shot["tasks"]
    ran = {name: entry for name, entry in entries.items() if entry["run"]}
    if not ran:
        return [*head, _nothing_ran(entries.values(), "No zero-shot task configured."), ""]
    trunks = _trunks(zero_shot)
    raw = [[trunk, f"{step:,}", *(f"{record['scores'][n][i]:.1f}" if n in record["scores"]
                                  else "" for n in ran)]
           for trunk, record in trunks.items() for i, step in enumerate(record["steps"])]
    last = {trunk: record for trunk, record in trunks.items() if record["steps"]}
    references, unscaled = [], []
    for name, entry in ran.items():
        figure = finetuned_figure(entry, finetune.get(name))
        reference = _reference(entry, finetune.get(name))
        if reference is None:
            unscaled.append(tasks[name].title)
        examples = f"{entry['examples']:,}" + (f" (+{entry['train_examples']:,} train)"
                                               if "train_examples" in entry else "")
        scaled = [f"{normalise(r['scores'][name][-1], entry['chance'], reference):.2f}"
                  if reference is not None and name in r["scores"] else "n/a"
                  for r in last.values()]
        references.append([tasks[name].title, entry["heuristic"],
                           f"{entry['split']} {entry['metric']}", examples,
                           f"{entry['chance']:.1f}", "n/a" if figure is None else f"{figure:.1f}",
                           *scaled])
    styles = "; ".join(f"{style}: {trunk}"
                       for style, trunk in zip(LINE_STYLES, trunks, strict=False))
    return [
        *head, *([f"![zero-shot behaviour]({plot})", ""] if plot else []),
        "Each task answered by the pretrained language model alone, no fine-tuning, at every "
        "pretraining snapshot (x: pretraining updates on a symlog axis, step 0 the untrained "
        "model). Left: (score - chance) / (fine-tuned - chance), 0 at chance and 1 at our "
        "fine-tuned model's dev figure (the paper divides by the single-model state of the art "
        "instead). Right: points above chance, every task"
        + (f", {', '.join(unscaled)} there alone (no fine-tuned figure above chance)"
           if unscaled else "")
        + f". One colour per task; {styles}.", "",
        *_table(["trunk", "step", *(f"{tasks[n].title} {e['metric']}" for n, e in ran.items())],
                raw, left=1), "",
        *_table(["task", "heuristic", "scored on", "examples", "chance", "fine-tuned (ours)",
                 *(f"{t}, step {r['steps'][-1]:,}, normalised" for t, r in last.items())],
                references, left=3), "",
        *(_stop(f"- {tasks[n].title}: not run: {e['reason']}") for n, e in entries.items()
          if not e["run"]),
        *([""] if len(ran) < len(entries) else []),
    ]


def analysis_sections(tasks: dict[str, TaskParams], analysis: Analysis,
                      finetune: dict[str, Result], plots: dict[str, str]) -> list[str]:
    """The report's lines for the paper's §5: Table 5, then Figure 2 left and right (`plots`:
    "transfer" and "zero_shot" -> the PNG's path relative to the report, where written)."""
    return [*ablation_section(tasks, analysis.ablation),
            *transfer_section(tasks, analysis.transfer, plots.get("transfer")),
            *zero_shot_section(tasks, analysis.zero_shot, finetune, plots.get("zero_shot"))]
