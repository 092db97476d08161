"""Stage `clean`: ftfy + standardisation + spaCy tokens for every document, with drop stats."""

from __future__ import annotations

import json
import logging

import pyarrow.parquet as pq

from gpt1.atomic import atomic_dir
from gpt1.config import Params
from gpt1.corpus.clean import clean_corpus
from gpt1.corpus.parallel import describe
from gpt1.errors import InputError, MissingInputError
from gpt1.progress import StepProgress
from tasks.paths import CLEAN_DIR, RAW_CORPUS
from tasks.stage import main

log = logging.getLogger("tasks.clean")  # run as __main__: named by its module path


def run(params: Params) -> None:
    inputs = sorted(RAW_CORPUS.glob("*.parquet"))
    if not inputs:
        raise MissingInputError(f"{RAW_CORPUS}: no Parquet files (run the ingest stage first)")
    total = sum(pq.ParquetFile(p).metadata.num_rows for p in inputs)
    with atomic_dir(CLEAN_DIR) as tmp, \
            StepProgress("clean (documents)", total, max(1, total // 10), log) as progress:
        stats = clean_corpus(inputs, tmp / "corpus.parquet", executor=params.executor,
                             batch_docs=params.clean.batch_docs, min_chars=params.clean.min_chars,
                             dedupe=params.clean.dedupe, on_progress=progress.update)
        if stats.docs_out == 0:
            raise InputError(f"clean: every document was dropped ({dict(stats.dropped)})")
        (tmp / "stats.json").write_text(json.dumps(stats.as_dict(), indent=2) + "\n")
    log.info("cleaned %d -> %d documents (%s); dropped %s", stats.docs_in, stats.docs_out,
             describe(params.executor), dict(stats.dropped))


if __name__ == "__main__":
    main("clean", run)
