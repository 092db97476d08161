"""The report's figures as PNG: per-task fine-tuning curves (a dev metric and the training loss
by epoch, per seed) and the paper's Figure 2 (layers transferred; zero-shot scores over
pretraining)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display, no GUI toolkit

import matplotlib.pyplot as plt
from matplotlib.ticker import MaxNLocator

Curve = list[tuple[int, float]]  # (epoch, value); (step, value) for the zero-shot curves
Band = tuple[int, float, float, float]  # (layers transferred, median, min, max) over seeds
TrunkCurves = dict[str, dict[str, Curve]]  # trunk -> task -> curve
LINE_STYLES = {"solid": "-", "dashed": "--", "dotted": ":", "dash-dotted": "-."}  # per trunk


@dataclass(frozen=True)
class Point:
    """A labelled score: its median and [low, high] over seeds, the majority class's score
    beside it (None: unknown), and whether it is (one of) the best."""

    label: str
    median: float
    low: float | None = None
    high: float | None = None
    majority: float | None = None
    best: bool = False



def _save(fig: plt.Figure, title: str, path: Path) -> None:
    """Title the figure, write it to `path` as a PNG and free it."""
    fig.suptitle(title)
    fig.savefig(path, dpi=100)
    plt.close(fig)

def plot_task_curves(title: str, metric: str, dev: dict[int, Curve], loss: dict[int, Curve],
                     path: Path) -> None:
    """Two panels, one line per seed: `metric` on the dev split and the training loss."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.5), constrained_layout=True)
    for axes, curves, label in ((left, dev, f"dev {metric}"), (right, loss, "train loss")):
        for seed, points in sorted(curves.items()):
            epochs, values = zip(*points, strict=True) if points else ((), ())
            axes.plot(epochs, values, marker="o", label=f"seed {seed}")
        axes.set_xlabel("epoch")
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        axes.set_ylabel(label)
        axes.grid(alpha=0.3)
    left.legend(fontsize="small")
    _save(fig, title, path)


def plot_transfer(curves: dict[str, list[Band]], path: Path) -> None:
    """Figure 2 (left): a dev score against the pretrained layers transferred, one line per
    label through the medians over seeds, shaded from the min to the max."""
    fig, axes = plt.subplots(figsize=(5.5, 3.8), constrained_layout=True)
    for label, bands in curves.items():
        ks, medians, lows, highs = zip(*bands, strict=True)
        (line,) = axes.plot(ks, medians, marker="o", label=label)
        axes.fill_between(ks, lows, highs, color=line.get_color(), alpha=0.2, linewidth=0)
    axes.set_xlabel("pretrained layers transferred")
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_ylabel("dev score (median, min-max over seeds)")
    axes.grid(alpha=0.3)
    axes.legend(fontsize="small")
    _save(fig, "Layers transferred", path)


def plot_zero_shot(normalised: TrunkCurves, above_chance: TrunkCurves, path: Path) -> None:
    """Figure 2 (right): each task's zero-shot score against pretraining updates (a symlog axis,
    so that step 0 shows), normalised (0: chance, 1: the fine-tuned figure) on the left and in
    points above chance on the right. One colour per task; one line style per trunk, in the order
    of `LINE_STYLES`."""
    panels = (normalised, above_chance)
    tasks = list(dict.fromkeys(task for p in panels for curves in p.values() for task in curves))
    trunks = list(dict.fromkeys(trunk for p in panels for trunk in p))
    colour = {task: f"C{i % 10}" for i, task in enumerate(tasks)}
    styles = list(LINE_STYLES.values())
    style = {trunk: styles[i % len(styles)] for i, trunk in enumerate(trunks)}
    steps = [step for p in panels for curves in p.values() for c in curves.values()
             for step, _ in c if step > 0]
    linthresh = min(steps, default=1)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
    labels = ("relative to fine-tuned (0 chance, 1 fine-tuned)", "points above chance")
    for ax, trunk_curves, label in zip(axes, panels, labels, strict=True):
        for trunk, curves in trunk_curves.items():
            for task, points in curves.items():
                xs, ys = zip(*points, strict=True)
                ax.plot(xs, ys, color=colour[task], linestyle=style[trunk], marker=".",
                        label=f"{task} ({trunk})")
        if any(trunk_curves.values()):
            ax.legend(fontsize="small")
        else:
            ax.text(0.5, 0.5, "no task to show", ha="center", va="center",
                    transform=ax.transAxes)
        ax.axhline(0, color="grey", linewidth=0.8)
        ax.set_xscale("symlog", linthresh=linthresh)
        ax.set_xlim(left=0)
        ax.set_xlabel("pretraining updates")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[0].axhline(1, color="grey", linewidth=0.8, linestyle="--")
    _save(fig, "Zero-shot behaviour over pretraining", path)


def plot_pretraining(train: Curve, val: Curve, unigram: float | None, path: Path) -> None:
    """The pretraining loss (nats per token) by step, train and val, against the unigram
    baseline's val loss (what token frequencies alone achieve) as a horizontal line."""
    fig, axes = plt.subplots(figsize=(7, 3.6), constrained_layout=True)
    for points, label, style in ((train, "train", "-"), (val, "val", "o-")):
        if points:
            steps, losses = zip(*points, strict=True)
            axes.plot(steps, losses, style, label=label, markersize=4)
    if unigram is not None:
        axes.axhline(unigram, color="grey", linestyle="--", linewidth=1,
                     label=f"unigram baseline (val) {unigram:.2f}")
    axes.set_xlabel("step")
    axes.set_ylabel("loss (nats per token)")
    axes.grid(alpha=0.3)
    axes.legend(fontsize="small")
    _save(fig, "Pretraining loss", path)


Bar = tuple[float, float, float]  # median, min, max over seeds


def _bars(axes: plt.Axes, groups: dict[str, dict[str, Bar | float]], variants: list[str],
          title: str) -> None:
    """Grouped bars: a group per key of `groups`, a bar per variant (a colour each), with
    min-max error bars where the value is a (median, min, max)."""
    width = 0.8 / max(len(variants), 1)
    for i, variant in enumerate(variants):
        xs, heights, low, high = [], [], [], []
        for g, values in enumerate(groups.values()):
            if variant not in values:
                continue
            value = values[variant]
            median, lo, hi = value if isinstance(value, tuple) else (value, value, value)
            xs.append(g - 0.4 + width * (i + 0.5))
            heights.append(median)
            low.append(median - lo)
            high.append(hi - median)
        axes.bar(xs, heights, width, label=variant, color=f"C{i % 10}",
                 yerr=[low, high] if any(low) or any(high) else None, capsize=3)
    axes.set_xticks(range(len(groups)), list(groups), fontsize="small")
    axes.set_title(title, fontsize="medium")
    axes.grid(axis="y", alpha=0.3)


def plot_table5(ours: dict[str, dict[str, Bar]], paper: dict[str, dict[str, float]],
                variants: list[str], path: Path) -> None:
    """Table 5 as grouped bars: ours (a group per task and train size, min-max over seeds as
    error bars) beside the paper's for the tasks Table 5 has."""
    panels = [(ours, "ours (median, min-max over seeds)")]
    if paper:
        panels.append((paper, "paper (Radford et al. 2018, Table 5)"))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels) + 1, 4.2),
                             constrained_layout=True, squeeze=False)
    for ax, (groups, title) in zip(axes[0], panels, strict=True):
        _bars(ax, groups, variants, title)
        ax.set_ylabel("dev score")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=min(len(variants), 4),
               fontsize="small", frameon=False)
    _save(fig, "Ablations (Table 5)", path)


def plot_finetune(tasks: dict[str, dict[str, Bar | float]], path: Path) -> None:
    """Each fine-tuned task's headline score (median, min-max over seeds) beside its baselines
    and the paper's figure: a group per task, a bar per source."""
    sources = list(dict.fromkeys(source for values in tasks.values() for source in values))
    fig, axes = plt.subplots(figsize=(max(5.0, 1.3 * len(tasks) + 2), 3.6),
                             constrained_layout=True)
    _bars(axes, tasks, sources, "")
    axes.set_ylabel("dev score (headline metric)")
    axes.legend(fontsize="small")
    _save(fig, "Fine-tuning: ours beside the baselines and the paper", path)


def plot_points(points: list[Point], title: str, path: Path) -> None:
    """One row per point, top to bottom: its median as a dot with a bar from low to high, the
    majority class as a grey tick on the same row, the best in a colour of its own."""
    fig, axes = plt.subplots(figsize=(7, 1.2 + 0.55 * len(points)), constrained_layout=True)
    rows = range(len(points))[::-1]
    for row, point in zip(rows, points, strict=True):
        low = point.median if point.low is None else point.low
        high = point.median if point.high is None else point.high
        axes.errorbar(point.median, row, xerr=[[point.median - low], [high - point.median]],
                      fmt="o", capsize=4, color="tab:orange" if point.best else "tab:blue")
        if point.majority is not None:
            axes.plot(point.majority, row, marker="|", markersize=14, color="grey")
    axes.set_yticks(list(rows), [point.label for point in points], fontsize="small")
    axes.set_xlabel("dev score: median, min-max over seeds (grey: majority class; "
                    "orange: best)")
    axes.grid(axis="x", alpha=0.3)
    _save(fig, title, path)
