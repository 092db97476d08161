"""Flow `full-pipeline`: every stage of dvc.yaml in dependency order, each a named task run."""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from flows.cli import parser, run_flow
from flows.pipeline import run_stages


@flow(name="full-pipeline", log_prints=True)
def full_pipeline(force: bool = False) -> dict[str, bool]:
    """Run the whole DAG of the checkout this runs in like `dvc repro` (`force`: re-run every
    stage, like `dvc repro -f`). Returns stage -> whether it ran (False: DVC found it up to
    date)."""
    return run_stages(Path.cwd(), force=force)


if __name__ == "__main__":
    parser("flows.full_pipeline", __doc__).parse_args()  # it takes none: refuse any
    run_flow(full_pipeline)
