"""The small JSON files the pipeline writes for itself: manifests, a task's `status.json`, the
metrics files, and the record of an output a stage had nothing to write into. Read back with the
file and the stage that writes it named when one is damaged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpt1.atomic import atomic_dir, atomic_file, write_text
from gpt1.errors import InputError

STATUS_FILE = "status.json"  # in an output folder of a stage that had nothing to do: why


def read_record(path: Path, stage: str) -> Any:
    """The JSON that stage `stage` wrote to `path`. Damaged (cut short, emptied, edited) it is
    bad input naming the file and the stage that writes it again; missing, an OSError."""
    text = path.read_text(encoding="utf-8")
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(f"{path}: damaged, not the JSON stage {stage} writes ({err}); run "
                         f"`dvc repro --force {stage}` to write it again") from err


def write_record(path: Path, record: dict[str, Any]) -> None:
    """`record` as indented JSON at `path`, atomically."""
    write_text(path, json.dumps(record, indent=2) + "\n")


def write_not_run(folder: Path, reason: str) -> None:
    """Replace `folder` (an output dvc.yaml declares) with one holding only `status.json`, which
    says the stage did not run and why: the output exists, as DVC requires, and says so."""
    with atomic_dir(folder) as tmp:
        (tmp / STATUS_FILE).write_text(json.dumps({"run": False, "reason": reason}) + "\n")


def not_run_reason(folder: Path, stage: str) -> str | None:
    """Why stage `stage`, which writes `folder`, did not run (`write_not_run`), or None if it
    ran."""
    status = folder / STATUS_FILE
    if not status.is_file():
        return None
    recorded = read_record(status, stage)
    return None if recorded["run"] else recorded["reason"]


def record_not_run(reason: str, folders: tuple[Path, ...] = (), metrics: Path | None = None,
                   **fields: Any) -> None:
    """A stage with nothing to do on these params: each of its output `folders` holds only
    `status.json` saying why, and its `metrics` file says `{**fields, "run": false, "reason":
    reason}` (what the report and `dvc metrics show` read)."""
    for folder in folders:
        write_not_run(folder, reason)
    if metrics is not None:
        write_record(metrics, {**fields, "run": False, "reason": reason})


def write_not_run_table(path: Path, reason: str) -> None:
    """Replace the Parquet file `path` (an output dvc.yaml declares) with one of no rows whose
    metadata says the stage did not run and why (`gpt1.not_run`)."""
    import pyarrow as pa  # imported here: the stages that read records need no pyarrow
    import pyarrow.parquet as pq

    table = pa.table({"prediction": pa.array([], pa.string())}).replace_schema_metadata(
        {"gpt1.not_run": reason})
    with atomic_file(path) as tmp:
        pq.write_table(table, tmp)
