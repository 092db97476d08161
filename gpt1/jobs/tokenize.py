"""Stage `tokenize`'s job: the clean corpus encoded into train and val shards of token ids
(`gpt1.corpus.encode`), with their manifest."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from gpt1.atomic import atomic_dir
from gpt1.config import ExecutorParams, TokenizeParams
from gpt1.corpus.encode import lopsided_split, tokenize_corpus
from gpt1.corpus.shards import sha256_file, token_dtype
from gpt1.corpus.tokenizer import GPT1Tokenizer
from gpt1.errors import InputError

log = logging.getLogger(__name__)


def write_shards(corpus_dir: Path, tokenizer_path: Path, out_dir: Path, params: TokenizeParams,
                 executor: ExecutorParams) -> dict[str, Any]:
    """Stage `tokenize`'s job: the documents in `corpus_dir` encoded with the tokenizer saved at
    `tokenizer_path` into train and val shards (`tokenize_corpus`) in `out_dir` (replaced
    atomically), with `manifest.json`: the token dtype, the vocabulary's size, the tokenizer's
    sha256 and each split's documents, tokens and shards. A split left empty is bad input; a
    lopsided one (`lopsided_split`) a warning. Returns the manifest."""
    tokenizer = GPT1Tokenizer.load(tokenizer_path)
    dtype = token_dtype(tokenizer.vocab_size)
    with atomic_dir(out_dir) as tmp:
        splits = tokenize_corpus(corpus_dir, tokenizer, tmp, val_every=params.val_every,
                                 shard_tokens=params.shard_tokens, executor=executor)
        docs = {split: s.documents for split, s in splits.items()}
        for split, shards in splits.items():
            if not shards.shards:
                raise InputError(f"tokenize: the {split} split is empty ({docs} documents); "
                                 "add text or lower tokenize.val_every")
        warning = lopsided_split(splits, params.val_every)
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
    return manifest
