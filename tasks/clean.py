"""Stage `clean`: ftfy + standardisation + spaCy tokens for every document, with drop stats."""

from __future__ import annotations

import logging

from gpt1.config import Params
from gpt1.corpus.parallel import describe
from gpt1.jobs.clean import clean_folder
from tasks.paths import CLEAN_DIR, RAW_CORPUS
from tasks.stage import main

log = logging.getLogger("tasks.clean")  # run as __main__: named by its module path


def run(params: Params) -> None:
    stats = clean_folder(RAW_CORPUS, CLEAN_DIR, params.clean, params.executor)
    log.info("cleaned %d -> %d documents (%s); dropped %s", stats.docs_in, stats.docs_out,
             describe(params.executor), dict(stats.dropped))


if __name__ == "__main__":
    main("clean", run)
