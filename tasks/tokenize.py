"""Stage `tokenize`: the clean corpus -> train/val Arrow shards of token ids + manifest."""

from __future__ import annotations

import logging

from gpt1.config import Params
from gpt1.corpus.parallel import describe
from gpt1.jobs.tokenize import write_shards
from gpt1.records import record_not_run
from tasks.paths import BPE_DIR, CLEAN_DIR, SHARDS_DIR
from tasks.stage import main

log = logging.getLogger("tasks.tokenize")  # run as __main__: named by its module path


def run(params: Params) -> None:
    if params.pretrain.released:
        record_not_run(f"pretrain.source is {params.pretrain.source}: nothing is pretrained here",
                       folders=(SHARDS_DIR,))
        log.info("not run: nothing is pretrained here")
        return
    manifest = write_shards(CLEAN_DIR, BPE_DIR / "tokenizer.json", SHARDS_DIR, params.tokenize,
                            params.executor)
    log.info("tokens: train %d, val %d (%s), encoded by %s", manifest["splits"]["train"]["tokens"],
             manifest["splits"]["val"]["tokens"], manifest["dtype"], describe(params.executor))


if __name__ == "__main__":
    main("tokenize", run)
