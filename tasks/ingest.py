"""Stage `ingest`: corpus books -> documents, and each task's splits -> one normalised schema."""

from __future__ import annotations

import logging
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from gpt1.atomic import atomic_dir
from gpt1.books import split_documents
from gpt1.config import Params
from gpt1.readers import read_task_split
from gpt1.registry import SPLITS
from tasks.paths import RAW_CORPUS, RAW_TASKS
from tasks.stage import main

log = logging.getLogger("gpt1.ingest")

CORPUS_SCHEMA = pa.schema([("id", pa.string()), ("source", pa.string()), ("text", pa.string())])


def corpus_files(root: Path, patterns: list[str]) -> list[Path]:
    """Files under `root` matching any of the glob `patterns`, sorted, without duplicates."""
    found = {p for pattern in patterns for p in root.glob(pattern) if p.is_file()}
    if not found:
        raise FileNotFoundError(f"no corpus file under {root} matches ingest.corpus {patterns}")
    return sorted(found)


def read_book(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as err:
        raise ValueError(f"{path}: not UTF-8 text (byte {err.start})") from None


def ingest_corpus(params: Params, root: Path, out: Path) -> int:
    """Write one Parquet file of documents per corpus file; return the number of documents."""
    total = 0
    for i, path in enumerate(corpus_files(root, params.ingest.corpus)):
        source = path.relative_to(root).as_posix()
        docs = split_documents(read_book(path), params.ingest.doc_chars)
        table = pa.table(
            {"id": [f"{source}#{k}" for k in range(len(docs))], "source": [source] * len(docs),
             "text": docs},
            schema=CORPUS_SCHEMA,
        )
        pq.write_table(table, out / f"{i:05d}.parquet")
        log.info("%s: %d documents, %d chars", source, len(docs), sum(map(len, docs)))
        total += len(docs)
    return total


def ingest_tasks(params: Params, root: Path, out: Path) -> None:
    caps = {"train": params.ingest.max_train_examples, "dev": params.ingest.max_dev_examples,
            "test": None}
    for task in params.finetune.tasks:
        (out / task).mkdir()
        for split in SPLITS:
            table = read_task_split(task, root, split)
            if caps[split] is not None:
                table = table.slice(0, caps[split])
            pq.write_table(table, out / task / f"{split}.parquet")
            log.info("task %s/%s: %d rows", task, split, table.num_rows)


def run(params: Params) -> None:
    root = Path(params.ingest.root)
    if not root.is_dir():
        raise FileNotFoundError(f"ingest.root: data root {root} is not a directory")
    with atomic_dir(RAW_CORPUS) as tmp:
        ingest_corpus(params, root, tmp)
    with atomic_dir(RAW_TASKS) as tmp:
        ingest_tasks(params, root, tmp)


if __name__ == "__main__":
    main("ingest", run)
