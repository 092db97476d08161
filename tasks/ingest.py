"""Stage `ingest`: corpus books -> documents, and each task's splits -> one normalised schema."""

from __future__ import annotations

from gpt1.config import Params
from gpt1.jobs.ingest import ingest
from tasks.paths import RAW_CORPUS, RAW_TASKS
from tasks.stage import main


def run(params: Params) -> None:
    ingest(params, RAW_CORPUS, RAW_TASKS)


if __name__ == "__main__":
    main("ingest", run)
