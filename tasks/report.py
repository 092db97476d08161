"""Stage `report`: the run report from every stage's metrics file, the stage records, the
pretraining curves and the text the model wrote: `reports/index.html` (one self-contained page),
`reports/summary.md` (the same as markdown), `reports/headline.txt` (what `make pipeline` prints)
and the PNGs in `reports/plots/`."""

from __future__ import annotations

import datetime
import logging
import os
from pathlib import Path

from gpt1.atomic import atomic_dir, write_text
from gpt1.config import Params
from gpt1.machine import machine, machine_line
from gpt1.reporting.facts import infer_preset, is_sample, pipeline_stages, stage_times
from gpt1.reporting.files import RunFiles, read_run
from gpt1.reporting.page import render_html, render_markdown, sections, write_plots
from gpt1.reporting.report import Run, RunFacts, headline_text
from gpt1.training.device import resolve_device, resolve_dtype
from tasks.paths import REPORT, REPORT_HEADLINE, REPORT_HTML, REPORT_PLOTS, RUN_FILES
from tasks.stage import checkout_commit, main

log = logging.getLogger("tasks.report")  # run as __main__: named by its module path


def precision(params: Params) -> str:
    """Where and in what pretraining and fine-tuning compute on this machine."""

    def resolved(device: str, precision: str) -> str:
        where = resolve_device(device)
        dtype = str(resolve_dtype(precision, where)).removeprefix("torch.")
        return f"{where.type}, {'bf16 autocast' if dtype == 'bfloat16' else 'fp32'}"

    pretrain = params.pretrain
    train = params.finetune.train
    return (f"pretraining {resolved(pretrain.device, pretrain.precision)} "
            f"(pretrain.precision {pretrain.precision}); fine-tuning "
            f"{resolved(train.device, train.precision)} (finetune.train.precision "
            f"{train.precision})")


def run_facts(params: Params, run: Run, root: Path) -> RunFacts:
    commit = checkout_commit(root)
    match = infer_preset(params.model_dump())
    return RunFacts(
        commit=commit["commit"], uncommitted_changes=bool(commit["uncommitted_changes"]),
        preset="custom" if match is None else match.describe(),
        data_root=params.ingest.root, sample=is_sample(params.ingest.root, root),
        machine=machine_line(machine()), precision=precision(params),
        # the report's own record is its last run's (DVC removes it before this one)
        stages=stage_times(run.data.stages, [s for s in pipeline_stages(params) if s != "report"]),
        built=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"))


def run(params: Params) -> None:
    files = RunFiles(**RUN_FILES)
    found = Run.of(params.tasks, read_run(params, files), files)
    prefix = f"{REPORT_PLOTS.relative_to(REPORT.parent).as_posix()}/"
    with atomic_dir(REPORT_PLOTS) as tmp:
        written = write_plots(found, list(params.analysis.ablation.variants), tmp, prefix)
    found = found.with_plots(written)
    facts = run_facts(params, found, Path(os.environ.get("DVC_ROOT", ".")))
    names = [f"[{path.name}]({path.name})" for path in (REPORT_HTML, REPORT, REPORT_HEADLINE)]
    parts = sections(found, params, facts, names)
    write_text(REPORT, render_markdown(parts, facts))
    write_text(REPORT_HTML, render_html(parts, facts, REPORT_HTML.parent))
    write_text(REPORT_HEADLINE, headline_text(found, facts))
    log.info("report written to %s and %s (%d plots)", REPORT_HTML, REPORT, len(written))


if __name__ == "__main__":
    main("report", run)
