"""Results a person wants to see in the Prefect UI, published as artifacts."""

from __future__ import annotations

from pathlib import Path

from prefect import task
from prefect.artifacts import create_markdown_artifact

from tasks.paths import REPORT


@task(task_run_name="publish-report")
def publish_report(repo_root: Path) -> None:
    """The benchmark report as a markdown artifact keyed `gpt1-report`."""
    report = repo_root / REPORT
    create_markdown_artifact(markdown=report.read_text(encoding="utf-8"), key="gpt1-report",
                             description="gpt1 benchmark report (reports/summary.md)")
