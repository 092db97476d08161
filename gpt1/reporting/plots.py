"""Per-task fine-tuning curves as PNG: a dev metric and the training loss by epoch, per seed."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display, no GUI toolkit

import matplotlib.pyplot as plt
from matplotlib.ticker import MaxNLocator

Curve = list[tuple[int, float]]  # (epoch, value)


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
    fig.suptitle(title)
    fig.savefig(path, dpi=100)
    plt.close(fig)
