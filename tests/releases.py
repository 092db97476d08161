"""Synthetic pretrained GPT-1s in the layouts the pipeline imports: OpenAI's release (its files
exactly as `openai/finetune-transformer-lm` ships them in `model/`) and a HuggingFace
`openai-gpt` directory written by transformers' own `save_pretrained`. Small dimensions, random
weights; the vocabulary is whatever encoder and merges files are given (the real 40,478-token
ones in `../shared/data/openai-gpt1`, or a toy one)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

ENCODER, MERGES = "encoder_bpe_40000.json", "vocab_40000.bpe"


def layout(n_positions: int, n_vocab: int, d: int, n_layer: int) -> list[list[int]]:
    """params_shapes.json of a release: positions, tokens, then each layer's conv kernels
    [1, in, out], biases and LayerNorm gains and biases."""
    layer = [[1, d, 3 * d], [3 * d], [1, d, d], [d], [d], [d],
             [1, d, 4 * d], [4 * d], [1, 4 * d, d], [d], [d], [d]]
    return [[n_positions, d], [n_vocab, d], *layer * n_layer]


def write_release_weights(folder: Path, shapes: list[list[int]], seed: int = 0,
                          scale: float = 0.3) -> list[np.ndarray]:
    """`params_shapes.json` and ten 1-D float32 shards of unequal sizes, cut from the arrays'
    concatenation as the release's are; returns the arrays."""
    rng = np.random.default_rng(seed)
    arrays = [rng.normal(0.0, scale, shape).astype(np.float32) for shape in shapes]
    flat = np.concatenate([a.ravel() for a in arrays])
    cuts = np.sort(rng.choice(np.arange(1, flat.size), size=9, replace=False))
    folder.mkdir(parents=True, exist_ok=True)
    for n, shard in enumerate(np.split(flat, cuts)):
        np.save(folder / f"params_{n}.npy", shard)
    (folder / "params_shapes.json").write_text(json.dumps(shapes))
    return arrays


def write_openai_release(folder: Path, vocab_dir: Path, n_positions: int, d: int, n_layer: int,
                         seed: int = 0) -> list[np.ndarray]:
    """A release in the original's files, with the encoder and merges of `vocab_dir`."""
    folder.mkdir(parents=True)
    for name in (ENCODER, MERGES):
        shutil.copyfile(vocab_dir / name, folder / name)
    n_vocab = len(json.loads((vocab_dir / ENCODER).read_text(encoding="utf-8")))
    return write_release_weights(folder, layout(n_positions, n_vocab, d, n_layer), seed)


def write_hf_directory(folder: Path, vocab_dir: Path, n_positions: int, d: int, n_layer: int,
                       n_head: int, seed: int = 0) -> None:
    """A random `OpenAIGPTDoubleHeadsModel` and the `OpenAIGPTTokenizer` of `vocab_dir`'s files,
    saved by transformers' `save_pretrained`."""
    import torch
    from transformers import OpenAIGPTConfig, OpenAIGPTDoubleHeadsModel, OpenAIGPTTokenizer

    n_vocab = len(json.loads((vocab_dir / ENCODER).read_text(encoding="utf-8")))
    torch.manual_seed(seed)
    model = OpenAIGPTDoubleHeadsModel(OpenAIGPTConfig(
        vocab_size=n_vocab, n_positions=n_positions, n_embd=d, n_layer=n_layer, n_head=n_head))
    model.save_pretrained(folder)
    OpenAIGPTTokenizer(str(vocab_dir / ENCODER), str(vocab_dir / MERGES)).save_pretrained(folder)
