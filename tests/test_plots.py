"""gpt1.reporting.plots: per-task curves and Figure 2 written as PNG files."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt

from gpt1.reporting.plots import plot_task_curves, plot_transfer, plot_zero_shot


def test_writes_a_png_and_leaves_no_figure_open(tmp_path: Path) -> None:
    path = tmp_path / "sst2.png"
    dev = {1: [(1, 70.0), (2, 80.0), (3, 82.5)], 2: [(1, 68.0), (2, 79.0), (3, 81.0)]}
    loss = {1: [(1, 0.9), (2, 0.6), (3, 0.5)], 2: [(1, 0.95), (2, 0.62), (3, 0.52)]}
    plot_task_curves("SST-2", "accuracy", dev, loss, path)
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 10_000
    assert plt.get_fignums() == []


def test_layers_transferred_writes_a_png(tmp_path: Path) -> None:
    bands = {"RTE accuracy (2,490 train)": [(k, 52.0 + k, 50.0 + k, 53.0 + k) for k in range(5)],
             "Story Cloze accuracy (1,497 train)": [(0, 60.0, 59.0, 61.0), (1, 64.0, 62.0, 65.0)]}
    plot_transfer(bands, tmp_path / "transfer.png")
    data = (tmp_path / "transfer.png").read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 10_000
    assert plt.get_fignums() == []


def test_zero_shot_writes_the_same_png_each_time(tmp_path: Path) -> None:
    steps = [0, 10, 30, 100, 300]
    above = {"Transformer": {"SST-2": list(zip(steps, [0.2, 1.0, 5.0, 10.1, 12.0], strict=True)),
                             "CoLA": list(zip(steps, [0.0, 1.0, 2.5, 4.0, 6.0], strict=True))},
             "LSTM": {"SST-2": list(zip(steps, [0.0, 0.0, 1.0, 2.0, 3.0], strict=True))}}
    normalised = {"Transformer": {"SST-2": [(s, v / 24) for s, v in above["Transformer"]["SST-2"]]},
                  "LSTM": {"SST-2": [(s, v / 24) for s, v in above["LSTM"]["SST-2"]]}}
    for name in ("a.png", "b.png"):
        plot_zero_shot(normalised, above, tmp_path / name)
    data = (tmp_path / "a.png").read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 10_000
    assert data == (tmp_path / "b.png").read_bytes()
    assert plt.get_fignums() == []


def test_zero_shot_with_nothing_to_normalise(tmp_path: Path) -> None:
    above = {"Transformer": {"CoLA": [(0, 0.0), (10, 1.5)]}}
    plot_zero_shot({"Transformer": {}}, above, tmp_path / "zero_shot.png")
    assert (tmp_path / "zero_shot.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert plt.get_fignums() == []
