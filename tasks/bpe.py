"""Stage `bpe`: learn the BPE vocabulary on the clean corpus."""

from __future__ import annotations

import logging
import sys

from gpt1.config import Params
from gpt1.jobs.bpe import learn_bpe
from gpt1.records import record_not_run
from tasks.paths import BPE_DIR, CLEAN_DIR
from tasks.stage import main

log = logging.getLogger("tasks.bpe")  # run as __main__: named by its module path


def run(params: Params) -> None:
    if params.pretrain.released:
        record_not_run(f"pretrain.source is {params.pretrain.source}: the tokenizer comes with "
                       f"the model in {params.pretrain.source_dir}", folders=(BPE_DIR,))
        log.info("not run: the tokenizer comes with the imported model")
        return
    tokenizer = learn_bpe(CLEAN_DIR, BPE_DIR, params.bpe, show_progress=sys.stderr.isatty())
    log.info("BPE vocabulary: %d tokens (with specials)", tokenizer.get_vocab_size())


if __name__ == "__main__":
    main("bpe", run)
