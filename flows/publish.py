"""Results a person wants to see in the Prefect UI, published as artifacts."""

from __future__ import annotations

from pathlib import Path

from prefect import task
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from gpt1.config import Params
from gpt1.reporting.document import self_contained
from gpt1.reporting.files import RunFiles, read_finetune
from gpt1.reporting.run import collect
from gpt1.reporting.table import metric_rows
from tasks.paths import REPORT, RUN_FILES


@task(task_run_name="publish-report")
def publish_report(repo_root: Path, params: Params, ran: dict[str, bool]) -> None:
    """Artifacts keyed `gpt1-report` (reports/summary.md, its figures embedded), `gpt1-metrics`
    (each task's dev metrics from the report's long table: median, spread, seeds, the majority
    class, the paper's figure) and `gpt1-stages` (which stages this run executed and which DVC
    found up to date)."""
    report = repo_root / REPORT
    create_markdown_artifact(markdown=self_contained(report.read_text(encoding="utf-8"),
                                                     report.parent),
                             key="gpt1-report",
                             description="gpt1 run report (reports/summary.md, its figures "
                                         "embedded; the page: reports/index.html)")
    finetune = read_finetune(params, RunFiles(**RUN_FILES), repo_root)
    create_table_artifact(table=metric_rows(params.tasks, collect(finetune=finetune)),
                          key="gpt1-metrics",
                          description="fine-tuning dev metrics per task (median over seeds)")
    create_table_artifact(
        table=[{"stage": stage, "ran": did} for stage, did in ran.items()], key="gpt1-stages",
        description="stages of this run: ran, or skipped by DVC as up to date")
