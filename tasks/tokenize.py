"""Stage `tokenize`: the clean corpus -> train/val Arrow shards of token ids + manifest."""

from __future__ import annotations

import json
import logging

from gpt1.atomic import atomic_dir
from gpt1.config import Params
from gpt1.corpus.bpe import GPT1Tokenizer
from gpt1.corpus.encode import lopsided_split, tokenize_corpus
from gpt1.corpus.parallel import describe
from gpt1.corpus.shards import sha256_file, token_dtype
from gpt1.errors import InputError
from gpt1.records import write_not_run
from tasks.paths import BPE_DIR, CLEAN_DIR, SHARDS_DIR
from tasks.stage import main

log = logging.getLogger("tasks.tokenize")  # run as __main__: named by its module path


def run(params: Params) -> None:
    if params.pretrain.released:
        write_not_run(SHARDS_DIR, f"pretrain.source is {params.pretrain.source}: nothing is "
                                  "pretrained here")
        log.info("not run: nothing is pretrained here")
        return
    tokenizer_path = BPE_DIR / "tokenizer.json"
    tokenizer = GPT1Tokenizer.load(tokenizer_path)
    dtype = token_dtype(tokenizer.vocab_size)
    with atomic_dir(SHARDS_DIR) as tmp:
        splits = tokenize_corpus(CLEAN_DIR, tokenizer, tmp, val_every=params.tokenize.val_every,
                                 shard_tokens=params.tokenize.shard_tokens,
                                 executor=params.executor)
        docs = {split: s.documents for split, s in splits.items()}
        for split, shards in splits.items():
            if not shards.shards:
                raise InputError(f"tokenize: the {split} split is empty ({docs} documents); "
                                 "add text or lower tokenize.val_every")
        warning = lopsided_split(splits, params.tokenize.val_every)
        if warning:
            log.warning("%s", warning)
        manifest = {
            "dtype": dtype.name,
            "vocab_size": tokenizer.vocab_size,
            "tokenizer_sha256": sha256_file(tokenizer_path),
            "splits": {
                split: {"documents": s.documents, "tokens": s.tokens,
                        "shards": [vars(info) for info in s.shards]}
                for split, s in splits.items()
            },
        }
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    log.info("tokens: train %d, val %d (%s), encoded by %s", manifest["splits"]["train"]["tokens"],
             manifest["splits"]["val"]["tokens"], dtype.name, describe(params.executor))


if __name__ == "__main__":
    main("tokenize", run)
