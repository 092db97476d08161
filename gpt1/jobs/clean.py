"""Stage `clean`'s job: the ingested corpus cleaned as the paper cleaned it (ftfy, spaCy:
`gpt1.corpus.clean`), with what was dropped and why."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from gpt1.atomic import atomic_dir
from gpt1.config import CleanParams, ExecutorParams
from gpt1.corpus.clean import CleanStats, clean_corpus
from gpt1.corpus.documents import count_documents
from gpt1.errors import InputError, MissingInputError
from gpt1.progress import StepProgress

log = logging.getLogger(__name__)


def clean_folder(raw_dir: Path, out_dir: Path, params: CleanParams,
                 executor: ExecutorParams) -> CleanStats:
    """Stage `clean`'s job: every document of the Parquet files in `raw_dir` cleaned
    (`clean_corpus`, with progress) into `out_dir/corpus.parquet`, beside `stats.json` (what
    was dropped, and why); `out_dir` is replaced atomically. No input, or no document left, is
    bad input."""
    inputs = sorted(raw_dir.glob("*.parquet"))
    if not inputs:
        raise MissingInputError(f"{raw_dir}: no Parquet files (run the ingest stage first)")
    total = count_documents(inputs)
    with atomic_dir(out_dir) as tmp, \
            StepProgress("clean (documents)", total, max(1, total // 10), log) as progress:
        stats = clean_corpus(inputs, tmp / "corpus.parquet", executor=executor,
                             batch_docs=params.batch_docs, min_chars=params.min_chars,
                             dedupe=params.dedupe, on_progress=progress.update)
        if stats.docs_out == 0:
            raise InputError(f"clean: every document was dropped ({dict(stats.dropped)})")
        (tmp / "stats.json").write_text(json.dumps(stats.as_dict(), indent=2) + "\n")
    return stats
