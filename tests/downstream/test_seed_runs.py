"""gpt1.downstream.seed_runs: the fine-tuning curve over epochs, each point the median over the
seeds' runs (of the headline dev figure and the training loss)."""

from __future__ import annotations

from gpt1.config import TaskParams
from gpt1.downstream.seed_runs import SeedRun, curve

TASK = TaskParams(title="Mine", family="classification", reader="glue_sst2", labels=["0", "1"],
                  metrics=["accuracy", "f1"], files={"train": "a/train.tsv", "dev": "a/dev.tsv"})


def _run(seed: int, dev: list[float], loss: list[float]) -> SeedRun:
    epochs = [{"epoch": i + 1, "train_loss": lo, "dev": {"dev": {"accuracy": d, "f1": 0.0}}}
              for i, (d, lo) in enumerate(zip(dev, loss, strict=True))]
    return SeedRun(seed, None, epochs, {}, {})  # type: ignore[arg-type]  # no model needed


def test_the_curve_is_the_median_over_seeds_of_each_epoch() -> None:
    runs = [_run(1, [50.0, 70.0], [2.0, 1.0]), _run(2, [60.0, 90.0], [3.0, 0.5]),
            _run(3, [55.0, 80.0], [2.5, 0.75])]
    assert curve(TASK, runs) == [(1, 55.0, 2.5), (2, 80.0, 0.75)]
    assert curve(TASK, runs[:2]) == [(1, 55.0, 2.5), (2, 80.0, 0.75)]  # even: the mean of two
