"""Stage `report`: `reports/summary.md` and per-task curves (PNG) from every task's metrics."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from gpt1.atomic import atomic_dir, write_text
from gpt1.config import Params
from gpt1.reporting.plots import plot_task_curves
from gpt1.reporting.report import Result, render_summary
from tasks.paths import (
    FINETUNE_METRICS,
    LM_EVAL_METRICS,
    PRETRAIN_METRICS,
    REPORT,
    REPORT_PLOTS,
)
from tasks.stage import main

log = logging.getLogger("tasks.report")  # run as __main__: named by its module path


def _read(path: Path, stage: str) -> Result:
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not found (run {stage} first)")
    return json.loads(path.read_text())


def write_plots(params: Params, results: dict[str, Result], out: Path) -> dict[str, str]:
    """A PNG of each task that ran; returns task -> path relative to the report."""
    links = {}
    for name, result in results.items():
        if not result["run"]:
            continue
        task = params.tasks[name]
        metric, split = task.metrics[0], task.eval_splits[0]
        dev = {run["seed"]: [(e["epoch"], e["dev"][split][metric]) for e in run["epochs"]]
               for run in result["runs"]}
        loss = {run["seed"]: [(e["epoch"], e["train_loss"]) for e in run["epochs"]]
                for run in result["runs"]}
        plot_task_curves(task.title, metric, dev, loss, out / f"{name}.png")
        links[name] = f"{REPORT_PLOTS.relative_to(REPORT.parent).as_posix()}/{name}.png"
    return links


def read_results(params: Params, root: Path = Path()) -> tuple[Result, dict[str, Result]]:
    """The pretraining metrics and every registry task's fine-tuning metrics under `root`."""
    pretrain = _read(root / PRETRAIN_METRICS, "pretrain")
    results = {name: _read(root / FINETUNE_METRICS / f"{name}.json", f"finetune@{name}")
               for name in params.tasks}
    return pretrain, results


def run(params: Params) -> None:
    pretrain, results = read_results(params)
    with atomic_dir(REPORT_PLOTS) as tmp:
        links = write_plots(params, results, tmp)
    lm_eval = _read(LM_EVAL_METRICS, "lm_eval")
    write_text(REPORT, render_summary(pretrain, params.tasks, results, links, lm_eval))
    log.info("report written to %s (%d task plots)", REPORT, len(links))


if __name__ == "__main__":
    main("report", run)
