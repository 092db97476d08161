"""Stage `ingest`: corpus books -> documents, and each task's splits -> one normalised schema."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from gpt1.atomic import atomic_dir
from gpt1.config import Params, TaskParams
from gpt1.corpus.books import corpus_files, read_book, split_documents
from gpt1.corpus.documents import DOCUMENT_SCHEMA
from gpt1.downstream.readers import holdout_split, missing_files, read_task_split, split_paths
from gpt1.errors import InputError, MissingInputError
from tasks.paths import RAW_CORPUS, RAW_TASKS
from tasks.stage import main

log = logging.getLogger("tasks.ingest")  # run as __main__: named by its module path



def write_documents(source: str, docs: list[str], path: Path) -> None:
    """The documents of one corpus file as a Parquet file, ids `<source>#<k>`."""
    table = pa.table(
        {"id": [f"{source}#{k}" for k in range(len(docs))], "source": [source] * len(docs),
         "text": docs},
        schema=DOCUMENT_SCHEMA,
    )
    pq.write_table(table, path)


def ingest_corpus(params: Params, root: Path, out: Path) -> int:
    """Write one Parquet file of documents per corpus file; return the number of documents."""
    total = 0
    for i, path in enumerate(corpus_files(root, params.ingest.corpus, "ingest.corpus")):
        source = path.relative_to(root).as_posix()
        docs = split_documents(read_book(path), params.ingest.doc_chars)
        write_documents(source, docs, out / f"{i:05d}.parquet")
        log.info("%s: %d documents, %d chars", source, len(docs), sum(map(len, docs)))
        total += len(docs)
    return total


def _row_cap(split: str, params: Params) -> int | None:
    if split == "train":
        return params.ingest.max_train_examples
    return params.ingest.max_dev_examples if split.startswith("dev") else None


def ingest_task(name: str, task: TaskParams, params: Params, root: Path,
                out: Path) -> dict[str, int]:
    """Write each split of registry task `name` (the dev split drawn from train where `holdout`
    says so) as `<split>.parquet`; return the rows per split."""
    tables = {split: read_task_split(task, root, split) for split in task.files}
    if task.holdout is not None:
        available, size = tables["train"].num_rows, task.holdout.size
        if size >= available:
            files = ", ".join(str(root / rel) for rel in split_paths(task, "train"))
            raise InputError(f"tasks.{name}.holdout.size: {size} dev rows would leave none for "
                             f"train: the train split ({files}) has {available} rows; hold out "
                             "fewer")
        tables["train"], tables["dev"] = holdout_split(tables["train"], size, task.holdout.seed)
    rows = {}
    for split, table in tables.items():
        cap = _row_cap(split, params)
        if cap is not None:
            table = table.slice(0, cap)
        pq.write_table(table, out / f"{split}.parquet")
        rows[split] = table.num_rows
    return rows


def ingest_tasks(params: Params, root: Path, out: Path) -> None:
    """Every registry task gets a folder with `status.json` (whether it runs, and why not);
    a requested task whose data is present also gets its splits."""
    requested = params.requested_tasks()
    explicit = params.finetune.tasks != "all"
    for name, task in params.tasks.items():
        dest = out / name
        dest.mkdir()
        missing = missing_files(task, root) if name in requested else []
        if name not in requested:
            status = {"run": False, "reason": "not in finetune.tasks"}
        elif missing:
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            if explicit:
                raise MissingInputError(f"task {name} (in finetune.tasks): data not found at "
                                        f"{missing[0]}{more}; see tasks.{name}.files")
            status = {"run": False, "reason": f"data not found at {missing[0]}{more}"}
        else:
            status = {"run": True, "rows": ingest_task(name, task, params, root, dest)}
        (dest / "status.json").write_text(json.dumps(status, indent=2) + "\n")
        log.info("task %s: %s", name, status.get("rows") or status["reason"])


def run(params: Params) -> None:
    root = Path(params.ingest.root)
    if not root.is_dir():
        raise MissingInputError(f"ingest.root: data root {root} is not a directory")
    with atomic_dir(RAW_CORPUS) as tmp:
        ingest_corpus(params, root, tmp)
    with atomic_dir(RAW_TASKS) as tmp:
        ingest_tasks(params, root, tmp)


if __name__ == "__main__":
    main("ingest", run)
