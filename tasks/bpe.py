"""Stage `bpe`: learn the BPE vocabulary on the clean corpus."""

from __future__ import annotations

import logging
import sys

import pyarrow.parquet as pq

from gpt1.atomic import atomic_dir
from gpt1.config import Params
from gpt1.corpus.bpe import train_bpe
from gpt1.corpus.documents import iter_texts
from gpt1.records import write_not_run
from tasks.paths import BPE_DIR, CLEAN_DIR
from tasks.stage import main

log = logging.getLogger("tasks.bpe")  # run as __main__: named by its module path


def run(params: Params) -> None:
    if params.pretrain.released:
        write_not_run(BPE_DIR, f"pretrain.source is {params.pretrain.source}: the tokenizer "
                               f"comes with the model in {params.pretrain.source_dir}")
        log.info("not run: the tokenizer comes with the imported model")
        return
    docs = sum(pq.ParquetFile(p).metadata.num_rows for p in sorted(CLEAN_DIR.glob("*.parquet")))
    tokenizer = train_bpe(iter_texts(CLEAN_DIR), params.bpe.vocab_size, params.bpe.min_frequency,
                          length=docs, show_progress=sys.stderr.isatty())
    with atomic_dir(BPE_DIR) as tmp:
        tokenizer.save(str(tmp / "tokenizer.json"))
        tokenizer.model.save(str(tmp))  # vocab.json + merges.txt, for other tools
    log.info("BPE vocabulary: %d tokens (with specials)", tokenizer.get_vocab_size())


if __name__ == "__main__":
    main("bpe", run)
