"""Import OpenAI's released GPT-1 (openai/finetune-transformer-lm, folder `model/`).

The release is one float32 vector cut into `params_0.npy`..`params_9.npy`, which the original
`train.py` concatenates and splits at the cumulative sizes listed in `params_shapes.json`:
positions [512, 768], tokens [40478, 768], then 12 arrays per layer, the projections stored as
TensorFlow 1x1 convolutions [1, in, out]. Its BPE is `encoder_bpe_40000.json` (token -> id,
`<unk>` = 0) with `vocab_40000.bpe` (a `#version` line, then one merge per line in rank order),
applied by `text_utils.TextEncoder` to spaCy's tokens of the ftfy-fixed, standardised text.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from functools import cached_property
from pathlib import Path

import ftfy
import numpy as np
import torch
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers

from gpt1.atomic import atomic_dir, check_replaceable
from gpt1.corpus.bpe import END_OF_WORD, SPECIAL_TOKENS, UNK, GPT1Tokenizer
from gpt1.corpus.text import text_standardize
from gpt1.interop.hf import MODEL_DIR_FILES
from gpt1.model.registry import save_model
from gpt1.model.transformer import GPT1, GPT1Config

SHAPES_FILE = "params_shapes.json"
ENCODER_FILE = "encoder_bpe_40000.json"
MERGES_FILE = "vocab_40000.bpe"
_SHARD = re.compile(r"params_(\d+)\.npy")
# A layer's arrays in the release's order, by the names our model (and HF's openai-gpt) uses.
LAYER_ARRAYS = (
    "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight", "attn.c_proj.bias",
    "ln_1.weight", "ln_1.bias",
    "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias",
    "ln_2.weight", "ln_2.bias",
)

Shape = tuple[int, ...]


def _layer_shapes(d: int) -> tuple[Shape, ...]:
    return ((1, d, 3 * d), (3 * d,), (1, d, d), (d,), (d,), (d,),
            (1, d, 4 * d), (4 * d,), (1, 4 * d, d), (d,), (d,), (d,))


def _read_json(path: Path) -> object:
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not found")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not valid JSON ({err})") from None


def read_shapes(release_dir: Path) -> list[Shape]:
    """The array shapes listed in `params_shapes.json`, in order."""
    path = release_dir / SHAPES_FILE
    shapes = _read_json(path)
    if not isinstance(shapes, list) or not all(
        isinstance(s, list) and all(isinstance(n, int) and n >= 0 for n in s) for s in shapes
    ):
        raise ValueError(f"{path}: expected a list of shapes (lists of non-negative integers)")
    return [tuple(s) for s in shapes]


def shard_paths(release_dir: Path) -> list[Path]:
    """`params_0.npy`..`params_k.npy`, numbered without gaps."""
    found = {int(m[1]): p for p in release_dir.glob("params_*.npy")
             if (m := _SHARD.fullmatch(p.name))}
    if not found:
        raise FileNotFoundError(f"{release_dir}: no params_*.npy weight shards")
    missing = sorted(set(range(max(found) + 1)) - set(found))
    if missing:
        names = ", ".join(f"params_{n}.npy" for n in missing)
        raise ValueError(f"{release_dir}: shards numbered 0..{max(found)} lack {names}")
    return [found[n] for n in range(len(found))]


def _open_shard(path: Path) -> np.ndarray:
    try:
        shard = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as err:
        raise ValueError(f"{path}: not a .npy array ({err})") from None
    if shard.ndim != 1 or not np.issubdtype(shard.dtype, np.floating):
        raise ValueError(f"{path}: expected a 1-D float array, got {shard.dtype} {shard.shape}")
    return shard


def split_params(flat: np.ndarray, shapes: list[Shape]) -> list[np.ndarray]:
    """Cut the concatenated shards at the cumulative sizes of `shapes` (views, no copies)."""
    sizes = [math.prod(s) for s in shapes]
    if flat.size != sum(sizes):
        raise ValueError(f"the shards hold {flat.size:,} numbers but {SHAPES_FILE} lists "
                         f"{sum(sizes):,}")
    pieces = np.split(flat, np.cumsum(sizes)[:-1])
    return [piece.reshape(shape) for piece, shape in zip(pieces, shapes, strict=True)]


def load_release_params(release_dir: Path) -> list[np.ndarray]:
    """The release's arrays, as `train.py` rebuilds them from the shards."""
    release_dir = Path(release_dir)
    shapes = read_shapes(release_dir)
    paths = shard_paths(release_dir)
    shards = [_open_shard(p) for p in paths]
    total = sum(s.size for s in shards)
    expected = sum(math.prod(s) for s in shapes)
    if total != expected:
        sizes = ", ".join(f"{p.name} {s.size:,}" for p, s in zip(paths, shards, strict=True))
        raise ValueError(f"{release_dir}: the shards hold {total:,} numbers ({sizes}) but "
                         f"{SHAPES_FILE} lists {expected:,}")
    return split_params(np.concatenate(shards, dtype=np.float32), shapes)


def release_config(shapes: list[Shape], n_ctx: int = 512, n_head: int = 12,
                   n_special: int = len(SPECIAL_TOKENS)) -> GPT1Config:
    """Our config for the release's shapes, after checking every shape against the layout."""
    if len(shapes) < 14 or (len(shapes) - 2) % len(LAYER_ARRAYS):
        raise ValueError(f"{SHAPES_FILE}: expected positions, tokens and {len(LAYER_ARRAYS)} "
                         f"arrays per layer, got {len(shapes)} arrays")
    (positions, tokens), layers = shapes[:2], shapes[2:]
    if len(positions) != 2 or len(tokens) != 2 or positions[1] != tokens[1]:
        raise ValueError(f"{SHAPES_FILE}: arrays 0 and 1 should be the position and token "
                         f"embeddings [n, d], got {list(positions)} and {list(tokens)}")
    d = tokens[1]
    n_layer = len(layers) // len(LAYER_ARRAYS)
    for i, (got, want) in enumerate(zip(layers, _layer_shapes(d) * n_layer, strict=True)):
        if got != want:
            layer, name = divmod(i, len(LAYER_ARRAYS))
            raise ValueError(f"{SHAPES_FILE}: array {i + 2} (layer {layer} "
                             f"{LAYER_ARRAYS[name]}) has shape {list(got)}, expected {list(want)}")
    if not 1 <= n_ctx <= positions[0]:
        raise ValueError(f"n_ctx must be between 1 and the release's {positions[0]} positions, "
                         f"got {n_ctx}")
    if n_head < 1 or d % n_head:
        raise ValueError(f"n_head must divide the embedding width {d}, got {n_head}")
    return GPT1Config(vocab_size=tokens[0] + n_special, n_ctx=n_ctx, n_embd=d, n_layer=n_layer,
                      n_head=n_head)


def release_to_model(params: list[np.ndarray], n_ctx: int = 512, n_head: int = 12,
                     n_special: int = len(SPECIAL_TOKENS), seed: int = 0) -> GPT1:
    """Our model holding the release's weights.

    The token embedding is the release's rows followed by `n_special` new rows drawn from
    N(0, 0.02) (seeded), as `train.py` appended its special tokens; positions are cut to `n_ctx`.
    """
    cfg = release_config([p.shape for p in params], n_ctx, n_head, n_special)
    positions, tokens, *layers = params
    special = np.random.default_rng(seed).normal(0.0, 0.02, (n_special, cfg.n_embd))
    arrays = {"positions_embed.weight": positions[:n_ctx],
              "tokens_embed.weight": np.concatenate([tokens, special.astype(np.float32)])}
    for i, array in enumerate(layers):
        layer, name = divmod(i, len(LAYER_ARRAYS))
        # a conv kernel [1, in, out] is the transpose of nn.Linear's (out, in)
        arrays[f"h.{layer}.{LAYER_ARRAYS[name]}"] = array[0].T if array.ndim == 3 else array
    with torch.device("meta"):  # no random init of weights about to be replaced
        model = GPT1(cfg)
    state = {k: torch.from_numpy(np.ascontiguousarray(v, dtype=np.float32))
             for k, v in arrays.items()}
    model.load_state_dict(state, strict=True, assign=True)
    return model


def _read_encoder(path: Path) -> dict[str, int]:
    encoder = _read_json(path)
    if not isinstance(encoder, dict) or sorted(encoder.values()) != list(range(len(encoder))):
        raise ValueError(f"{path}: expected a token -> id map with ids 0..n-1")
    return encoder


def _read_merges(path: Path, encoder: dict[str, int]) -> list[tuple[str, str]]:
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not found")
    first, *lines = path.read_text(encoding="utf-8").split("\n")
    if not first.startswith("#version"):
        raise ValueError(f"{path}: line 1 should be the '#version' header, got {first[:40]!r}")
    merges = []
    for number, line in enumerate(lines, start=2):
        if not line:
            continue
        pair = tuple(line.split())
        if len(pair) != 2 or any(tok not in encoder for tok in (*pair, "".join(pair))):
            raise ValueError(f"{path}: line {number} {line!r} is not a merge of two tokens of "
                             f"{ENCODER_FILE} into a third")
        merges.append(pair)
    return merges


def release_tokenizer(release_dir: Path) -> Tokenizer:
    """The released BPE as a `tokenizers` tokenizer, our special tokens appended after it.

    It splits words on spaces only, so that spaCy's newline tokens, which the original encodes as
    `\\n</w>`, stay words: on text without newlines it matches our own tokenizers' WhitespaceSplit.
    """
    release_dir = Path(release_dir)
    encoder = _read_encoder(release_dir / ENCODER_FILE)
    merges = _read_merges(release_dir / MERGES_FILE, encoder)
    tokenizer = Tokenizer(models.BPE(vocab=encoder, merges=merges, unk_token=UNK,
                                     end_of_word_suffix=END_OF_WORD))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Split(" ", behavior="removed")
    tokenizer.decoder = decoders.BPEDecoder(suffix=END_OF_WORD)
    tokenizer.add_special_tokens(list(SPECIAL_TOKENS))
    return tokenizer


class OpenAITextEncoder:
    """The original `TextEncoder.encode` on raw text: ftfy, `text_standardize`, spaCy tokens
    (whitespace tokens included), lower-cased, then BPE, unknown pieces -> 0."""

    def __init__(self, tokenizer: GPT1Tokenizer) -> None:
        self.tokenizer = tokenizer

    @cached_property
    def _spacy(self):
        import spacy

        return spacy.blank("en").tokenizer

    def words(self, text: str) -> list[str]:
        return [tok.text.lower() for tok in self._spacy(text_standardize(ftfy.fix_text(text)))]

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(" ".join(self.words(text)))

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return self.tokenizer.encode_batch([" ".join(self.words(t)) for t in texts])

    def decode(self, ids: Iterable[int]) -> str:
        return self.tokenizer.decode(ids)


def load_release_tokenizer(release_dir: Path) -> OpenAITextEncoder:
    return OpenAITextEncoder(GPT1Tokenizer(release_tokenizer(release_dir)))


def import_release(release_dir: Path, out_dir: Path, n_ctx: int = 512, n_head: int = 12,
                   seed: int = 0, force: bool = False) -> GPT1Config:
    """Write the release as a model directory (`config.json`, `model.safetensors`,
    `tokenizer.json`) that `gpt1 generate` and fine-tuning read; replaces `out_dir` atomically.

    An existing `out_dir` holding more than `MODEL_DIR_FILES` is refused, unless `force`.
    """
    release_dir, out_dir = Path(release_dir), Path(out_dir)
    check_replaceable(out_dir, MODEL_DIR_FILES, force)
    tokenizer = release_tokenizer(release_dir)
    cfg = release_config(read_shapes(release_dir), n_ctx, n_head)
    n_tokens = tokenizer.get_vocab_size(with_added_tokens=False)
    if n_tokens + len(SPECIAL_TOKENS) != cfg.vocab_size:
        raise ValueError(f"{release_dir / ENCODER_FILE}: {n_tokens} tokens, but {SHAPES_FILE} "
                         f"has {cfg.vocab_size - len(SPECIAL_TOKENS)} token rows")
    model = release_to_model(load_release_params(release_dir), n_ctx, n_head, seed=seed)
    with atomic_dir(out_dir) as tmp:
        save_model(model, tmp)
        tokenizer.save(str(tmp / "tokenizer.json"))
    return model.config
