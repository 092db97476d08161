"""What tokenize leaves for pretraining, made small and random for tests: a BPE tokenizer over
made-up words and token shards with their manifest."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np

from gpt1.corpus.shards import ShardWriter
from gpt1.corpus.tokenizer import train_bpe


def write_token_shards(bpe: Path, shards: Path, tokens: dict[str, int], shard_tokens: int) -> int:
    """`bpe/tokenizer.json` (a 100-token BPE) and `shards/<split>/` holding `tokens[split]`
    random ids in shards of `shard_tokens`, with `shards/manifest.json`; the vocabulary size."""
    rng = random.Random(0)
    words = ["".join(rng.choice("abcdefgh") for _ in range(rng.randint(2, 6))) for _ in range(50)]
    tokenizer = train_bpe([" ".join(rng.choices(words, k=30)) for _ in range(40)], 100, 2)
    bpe.mkdir(parents=True)
    tokenizer.save(str(bpe / "tokenizer.json"))
    vocab = tokenizer.get_vocab_size()
    ids = np.random.default_rng(0)
    splits = {}
    for split, count in tokens.items():
        writer = ShardWriter(shards / split, np.dtype(np.uint16), shard_tokens)
        writer.append(ids.integers(0, vocab, count).astype(np.uint16))
        splits[split] = {"tokens": count, "shards": [vars(info) for info in writer.close()]}
    manifest = {"vocab_size": vocab, "splits": splits}  # what pretraining checks the shards by
    (shards / "manifest.json").write_text(json.dumps(manifest))
    return vocab
