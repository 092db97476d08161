"""gpt1.reporting.plots: per-task curves written as PNG files."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt

from gpt1.reporting.plots import plot_task_curves


def test_writes_a_png_and_leaves_no_figure_open(tmp_path: Path) -> None:
    path = tmp_path / "sst2.png"
    dev = {1: [(1, 70.0), (2, 80.0), (3, 82.5)], 2: [(1, 68.0), (2, 79.0), (3, 81.0)]}
    loss = {1: [(1, 0.9), (2, 0.6), (3, 0.5)], 2: [(1, 0.95), (2, 0.62), (3, 0.52)]}
    plot_task_curves("SST-2", "accuracy", dev, loss, path)
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 10_000
    assert plt.get_fignums() == []
