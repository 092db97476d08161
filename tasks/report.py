"""Stage `report`: `reports/summary.md` and its PNGs from every task's metrics and the paper's
evidence (§5): the ablations (Table 5), layers transferred and zero-shot curves (Figure 2)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from gpt1.atomic import atomic_dir, write_text
from gpt1.config import Params
from gpt1.reporting.analysis import (
    Analysis,
    analysis_sections,
    transfer_curves,
    zero_shot_curves,
)
from gpt1.reporting.plots import plot_task_curves, plot_transfer, plot_zero_shot
from gpt1.reporting.report import Result, render_summary
from tasks.paths import (
    ABLATION_METRICS,
    FINETUNE_METRICS,
    LM_EVAL_METRICS,
    PRETRAIN_METRICS,
    REPORT,
    REPORT_PLOTS,
    TRANSFER_METRICS,
    ZERO_SHOT_METRICS,
)
from tasks.stage import main

log = logging.getLogger("tasks.report")  # run as __main__: named by its module path


def _read(path: Path, stage: str) -> Result:
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not found (run {stage} first)")
    return json.loads(path.read_text())


def _link(name: str) -> str:
    """Where plot `name` (in the plots folder) lies, relative to the report."""
    return f"{REPORT_PLOTS.relative_to(REPORT.parent).as_posix()}/{name}.png"


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
        links[name] = _link(name)
    return links


def write_analysis_plots(params: Params, analysis: Analysis, results: dict[str, Result],
                         out: Path) -> dict[str, str]:
    """Figure 2's PNGs, `transfer` and `zero_shot`, each where something ran; returns name ->
    path relative to the report."""
    links = {}
    curves = transfer_curves(params.tasks, analysis.transfer)
    if curves:
        plot_transfer(curves, out / "transfer.png")
        links["transfer"] = _link("transfer")
    normalised, above_chance = zero_shot_curves(params.tasks, analysis.zero_shot, results)
    if any(above_chance.values()):
        plot_zero_shot(normalised, above_chance, out / "zero_shot.png")
        links["zero_shot"] = _link("zero_shot")
    return links


def read_results(params: Params, root: Path = Path()) -> tuple[Result, dict[str, Result]]:
    """The pretraining metrics and every registry task's fine-tuning metrics under `root`."""
    pretrain = _read(root / PRETRAIN_METRICS, "pretrain")
    results = {name: _read(root / FINETUNE_METRICS / f"{name}.json", f"finetune@{name}")
               for name in params.tasks}
    return pretrain, results


def read_analysis(params: Params, root: Path = Path()) -> Analysis:
    """The metrics files under `root` of every ablation (variant x task), transfer task and
    zero-shot task, as `params.analysis` names them."""
    ablation, transfer = params.analysis.ablation, params.analysis.transfer
    return Analysis(
        ablation={variant: {task: _read(root / ABLATION_METRICS / variant / f"{task}.json",
                                        f"ablation@{variant}-{task}")
                            for task in ablation.tasks}
                  for variant in ablation.variants},
        transfer={task: _read(root / TRANSFER_METRICS / f"{task}.json", f"transfer@{task}")
                  for task in transfer.tasks},
        zero_shot=combine_zero_shot({
            task: _read(root / ZERO_SHOT_METRICS / f"{task}.json", f"zero_shot@{task}")
            for task in params.analysis.zero_shot.tasks}))


def combine_zero_shot(per_task: dict[str, Result]) -> Result:
    """The zero-shot stages' files as one: each task's entry, and per trunk the snapshot steps
    with each task's scores at them."""
    tasks = {name: {k: v for k, v in result.items() if k not in ("task", "trunks", "seconds")}
             for name, result in per_task.items()}
    trunks: dict[str, Result] = {}
    for name, result in per_task.items():
        for trunk, curve in result.get("trunks", {}).items():
            combined = trunks.setdefault(trunk, {"steps": curve["steps"], "scores": {}})
            if combined["steps"] != curve["steps"]:
                raise ValueError(f"{ZERO_SHOT_METRICS / name}.json: {trunk}'s snapshots "
                                 f"{curve['steps']} differ from the other tasks' "
                                 f"{combined['steps']}: re-run the zero_shot stages")
            combined["scores"][name] = curve["scores"]
    return {"tasks": tasks, "trunks": trunks}


def run(params: Params) -> None:
    pretrain, results = read_results(params)
    lm_eval = _read(LM_EVAL_METRICS, "lm_eval")
    analysis = read_analysis(params)
    with atomic_dir(REPORT_PLOTS) as tmp:
        links = write_plots(params, results, tmp)
        figures = write_analysis_plots(params, analysis, results, tmp)
    sections = analysis_sections(params.tasks, analysis, results, figures)
    write_text(REPORT, render_summary(pretrain, params.tasks, results, links, lm_eval, sections))
    log.info("report written to %s (%d task plots, %d analysis plots)", REPORT, len(links),
             len(figures))


if __name__ == "__main__":
    main("report", run)
