"""Results a person wants to see in the Prefect UI, published as artifacts."""

from __future__ import annotations

from pathlib import Path

from prefect import task
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from gpt1.config import Params
from gpt1.reporting.report import metric_rows
from tasks.paths import REPORT
from tasks.report import read_results


@task(task_run_name="publish-report")
def publish_report(repo_root: Path, params: Params, ran: dict[str, bool]) -> None:
    """Artifacts keyed `gpt1-report` (reports/summary.md), `gpt1-metrics` (each task's dev
    metrics: median, spread, seeds, the paper's figure) and `gpt1-stages` (which stages this
    run executed and which DVC found up to date)."""
    report = repo_root / REPORT
    create_markdown_artifact(markdown=report.read_text(encoding="utf-8"), key="gpt1-report",
                             description="gpt1 benchmark report (reports/summary.md)")
    _, results = read_results(params, repo_root)
    create_table_artifact(table=metric_rows(params.tasks, results), key="gpt1-metrics",
                          description="fine-tuning dev metrics per task (median over seeds)")
    create_table_artifact(
        table=[{"stage": stage, "ran": did} for stage, did in ran.items()], key="gpt1-stages",
        description="stages of this run: ran, or skipped by DVC as up to date")
