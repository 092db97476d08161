"""Stage `report`'s job: the run's metrics files read into one `Run`, its PNGs, the markdown
summary, the self-contained HTML page and the short headline written (`gpt1.reporting`)."""

from __future__ import annotations

import datetime
from pathlib import Path

from gpt1.atomic import atomic_dir, write_text
from gpt1.config import Params
from gpt1.dag import resolve
from gpt1.reporting.facts import (
    infer_preset,
    is_sample,
    stage_times,
    where_trained,
)
from gpt1.reporting.files import RunFiles, read_run
from gpt1.reporting.page import render_html, render_markdown, sections, write_plots
from gpt1.reporting.run import Run, RunFacts
from gpt1.reporting.sections import headline_text


def run_facts(params: Params, run: Run, root: Path, commit: dict[str, object]) -> RunFacts:
    """What ran, for the first screen: `commit` is the checkout's at `root` (its commit, and
    whether tracked files differ), `run` holds the stage records."""
    match = infer_preset(params.model_dump())
    return RunFacts(
        commit=commit["commit"], uncommitted_changes=bool(commit["uncommitted_changes"]),
        preset="custom" if match is None else match.describe(),
        data_root=params.ingest.root, sample=is_sample(params.ingest.root, root),
        trained=where_trained(run.data.pretrain, run.data.finetune),
        # not the report's own (its last run's, where one is left in metrics/stages)
        stages=stage_times(run.data.stages,
                           [s for s in resolve(params, root).stages() if s != "report"]),
        built=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"))


def write_report(params: Params, files: RunFiles, root: Path, commit: dict[str, object], *,
                 summary: Path, page: Path, headline: Path, plots: Path) -> dict[str, str]:
    """The report of the run whose files `files` names: the PNGs into folder `plots`, the
    markdown `summary`, the HTML `page` and the `headline` text (each written atomically);
    `root` and `commit` as `run_facts` takes them. Returns the PNGs written (`write_plots`)."""
    found = Run.of(params.tasks, read_run(params, files), files)
    prefix = f"{plots.relative_to(summary.parent).as_posix()}/"
    with atomic_dir(plots) as tmp:
        written = write_plots(found, list(params.analysis.ablation.variants), tmp, prefix)
    found = found.with_plots(written)
    facts = run_facts(params, found, root, commit)
    names = [f"[{path.name}]({path.name})" for path in (page, summary, headline)]
    parts = sections(found, params, facts, names)
    write_text(summary, render_markdown(parts, facts))
    write_text(page, render_html(parts, facts, page.parent))
    write_text(headline, headline_text(found, facts))
    return written
