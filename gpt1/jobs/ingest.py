"""Stage `ingest`'s job: the corpus books as documents (`gpt1.corpus.books.ingest_corpus`), and
each registry task's splits in one normalised schema, its folder's status file
(`gpt1.records.STATUS_FILE`) saying whether it runs (with its rows per split) or why not."""

from __future__ import annotations

import logging
from pathlib import Path

import pyarrow.parquet as pq

from gpt1.atomic import atomic_dir
from gpt1.config import Params, TaskParams
from gpt1.corpus.books import ingest_corpus
from gpt1.data_root import check_data_root
from gpt1.downstream.readers import holdout_split, missing_files, read_task_split, split_paths
from gpt1.errors import InputError, MissingInputError
from gpt1.records import STATUS_FILE, write_record

log = logging.getLogger(__name__)
# in the folder of a task that runs: its registry entry as validated, so that the stages of the
# task, which depend on its folder, re-run when the entry changes (dvc.yaml lists no
# `tasks.<task>` param for them: one entry fewer in dvc.lock per stage)
ENTRY_FILE = "registry_entry.json"


def _row_cap(split: str, params: Params) -> int | None:
    if split == "train":
        return params.ingest.max_train_examples
    if split.startswith("dev"):
        return params.ingest.max_dev_examples
    return params.ingest.max_test_examples


def ingest_task(name: str, task: TaskParams, params: Params, root: Path,
                out: Path) -> dict[str, int]:
    """Write each split of registry task `name` (the dev split drawn from train where `holdout`
    says so) as `<split>.parquet`, capped at `ingest.max_train_examples`,
    `ingest.max_dev_examples` and `ingest.max_test_examples` rows; return the rows per split.
    A `predict` file is not read: only a fine-tuned model scores it."""
    tables = {split: read_task_split(task, root, split) for split in task.data_splits}
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
    a requested task whose data is present also gets its splits. A task `finetune.tasks` names
    whose data is absent is an error; under `all`, it does not run."""
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
            write_record(dest / ENTRY_FILE, task.model_dump(mode="json"))
        write_record(dest / STATUS_FILE, status)
        log.info("task %s: %s", name, status.get("rows") or status["reason"])


def ingest(params: Params, corpus_out: Path, tasks_out: Path) -> None:
    """The corpus under `ingest.root` into folder `corpus_out`, every registry task into a
    folder of `tasks_out` (each replaced atomically)."""
    root = Path(params.ingest.root)
    if not root.is_dir():
        raise MissingInputError(f"ingest.root: data root {root} is not a directory")
    check_data_root(root)
    with atomic_dir(corpus_out) as tmp:
        ingest_corpus(root, params.ingest.corpus, params.ingest.doc_chars, tmp)
    with atomic_dir(tasks_out) as tmp:
        ingest_tasks(params, root, tmp)
