"""gpt1.reporting.plots: the pretraining curves, the fine-tuning summary and per-task curves,
Table 5 and Figure 2 written as PNG files."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt

from gpt1.reporting.plots import (
    plot_finetune,
    plot_pretraining,
    plot_table5,
    plot_task_curves,
    plot_transfer,
    plot_zero_shot,
)


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


def _png(path: Path) -> bytes:
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 10_000
    assert plt.get_fignums() == []
    return data


def test_pretraining_curves_with_and_without_the_unigram_line(tmp_path: Path) -> None:
    train = [(step, 9.0 - step / 10) for step in range(0, 40, 5)]
    val = [(20, 7.4), (40, 6.1)]
    plot_pretraining(train, val, 7.9, tmp_path / "with.png")
    plot_pretraining(train, val, None, tmp_path / "without.png")
    assert _png(tmp_path / "with.png") != _png(tmp_path / "without.png")


def test_table5_bars_beside_the_papers(tmp_path: Path) -> None:
    variants = ["Transformer w/ aux LM (full)", "Transformer w/o pre-training"]
    ours = {"SST-2\n1,000 train": {variants[0]: (80.1, 79.0, 81.2),
                                    variants[1]: (60.0, 58.0, 61.0)},
            "Story Cloze\n60 train": {variants[0]: (55.0, 55.0, 55.0)}}
    paper = {"SST-2": {variants[0]: 91.3, variants[1]: 84.0}}
    plot_table5(ours, paper, variants, tmp_path / "table5.png")
    plot_table5(ours, {}, variants, tmp_path / "ours_only.png")
    assert _png(tmp_path / "table5.png") != _png(tmp_path / "ours_only.png")


def test_finetune_summary_bars(tmp_path: Path) -> None:
    plot_finetune({"SST-2\naccuracy": {"ours": (80.0, 78.5, 81.25), "majority class": 50.9,
                                       "paper": 91.3},
                   "STS-B\npearson": {"ours": (7.7, 7.7, 7.7), "paper": 82.0}},
                  tmp_path / "finetune.png")
    _png(tmp_path / "finetune.png")
