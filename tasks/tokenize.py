"""Stage `tokenize`: the clean corpus -> train/val Arrow shards of token ids + manifest."""

from __future__ import annotations

import json
import logging

import numpy as np

from gpt1.atomic import atomic_dir
from gpt1.bpe import Gpt1Tokenizer
from gpt1.config import Params
from gpt1.documents import iter_text_batches
from gpt1.shards import ShardWriter, sha256_file, token_dtype
from tasks.paths import BPE_DIR, CLEAN_DIR, SHARDS_DIR
from tasks.stage import main

log = logging.getLogger("gpt1.tokenize")

ENCODE_BATCH = 256


def run(params: Params) -> None:
    tokenizer_path = BPE_DIR / "tokenizer.json"
    tokenizer = Gpt1Tokenizer.load(tokenizer_path)
    dtype = token_dtype(tokenizer.vocab_size)
    every = params.tokenize.val_every
    docs = {"train": 0, "val": 0}
    with atomic_dir(SHARDS_DIR) as tmp:
        writers = {split: ShardWriter(tmp / split, dtype, params.tokenize.shard_tokens)
                   for split in docs}
        doc_index = 0
        for batch in iter_text_batches(CLEAN_DIR, ENCODE_BATCH):
            for ids in tokenizer.encode_batch(batch):
                split = "val" if doc_index % every == 0 else "train"
                writers[split].append(np.asarray(ids, dtype=dtype))
                docs[split] += 1
                doc_index += 1
        shards = {split: w.close() for split, w in writers.items()}
        for split, infos in shards.items():
            if not infos:
                raise ValueError(f"tokenize: the {split} split is empty ({docs} documents); "
                                 "add text or lower tokenize.val_every")
        manifest = {
            "dtype": dtype.name,
            "vocab_size": tokenizer.vocab_size,
            "tokenizer_sha256": sha256_file(tokenizer_path),
            "splits": {
                split: {"documents": docs[split], "tokens": sum(s.tokens for s in infos),
                        "shards": [vars(s) for s in infos]}
                for split, infos in shards.items()
            },
        }
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    log.info("tokens: train %d, val %d (%s)", manifest["splits"]["train"]["tokens"],
             manifest["splits"]["val"]["tokens"], dtype.name)


if __name__ == "__main__":
    main("tokenize", run)
