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
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers

from gpt1.atomic import atomic_dir, check_replaceable
from gpt1.corpus.tokenizer import END_OF_WORD, SPECIAL_TOKENS, UNK
from gpt1.errors import InputError, MissingInputError, not_found
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
        raise not_found(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise InputError(f"{path}: not valid JSON ({err})") from None


def read_shapes(release_dir: Path) -> list[Shape]:
    """The array shapes listed in `params_shapes.json`, in order."""
    path = release_dir / SHAPES_FILE
    shapes = _read_json(path)
    if not isinstance(shapes, list) or not all(
        isinstance(s, list) and all(isinstance(n, int) and n >= 0 for n in s) for s in shapes
    ):
        raise InputError(f"{path}: expected a list of shapes (lists of non-negative integers)")
    return [tuple(s) for s in shapes]


def shard_paths(release_dir: Path) -> list[Path]:
    """`params_0.npy`..`params_k.npy`, numbered without gaps."""
    found = {int(m[1]): p for p in release_dir.glob("params_*.npy")
             if (m := _SHARD.fullmatch(p.name))}
    if not found:
        raise MissingInputError(f"{release_dir}: no params_*.npy weight shards")
    missing = sorted(set(range(max(found) + 1)) - set(found))
    if missing:
        names = ", ".join(f"params_{n}.npy" for n in missing)
        raise InputError(f"{release_dir}: shards numbered 0..{max(found)} lack {names}")
    return [found[n] for n in range(len(found))]


NPY_MAGIC = b"\x93NUMPY"  # how every .npy file starts (numpy.lib.format)


def _open_shard(path: Path) -> np.ndarray:
    with path.open("rb") as fh:
        if fh.read(len(NPY_MAGIC)) != NPY_MAGIC:
            raise InputError(f"{path}: not a numpy .npy file (it does not start with numpy's "
                             "magic bytes); the release's shards are params_<n>.npy arrays")
    try:
        shard = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as err:
        raise InputError(f"{path}: not a .npy array ({err})") from None
    if shard.ndim != 1 or not np.issubdtype(shard.dtype, np.floating):
        raise InputError(f"{path}: expected a 1-D float array, got {shard.dtype} {shard.shape}")
    return shard


def split_params(flat: np.ndarray, shapes: list[Shape]) -> list[np.ndarray]:
    """Cut the concatenated shards at the cumulative sizes of `shapes` (views, no copies)."""
    sizes = [math.prod(s) for s in shapes]
    if flat.size != sum(sizes):
        raise InputError(f"the shards hold {flat.size:,} numbers but {SHAPES_FILE} lists "
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
        raise InputError(f"{release_dir}: the shards hold {total:,} numbers ({sizes}) but "
                         f"{SHAPES_FILE} lists {expected:,}")
    flat = np.concatenate(shards, dtype=np.float32)
    check_finite(flat, paths, [s.size for s in shards], shapes)
    return split_params(flat, shapes)


def check_finite(flat: np.ndarray, paths: list[Path], shard_sizes: list[int],
                 shapes: list[Shape]) -> None:
    """Refuse a release holding a NaN or an infinity, naming the shard file, the position in it
    and the array of `params_shapes.json` it falls in: such weights would import, and generate
    or fine-tune nothing but NaN."""
    bad = np.flatnonzero(~np.isfinite(flat))
    if not bad.size:
        return
    first = int(bad[0])
    shard = int(np.searchsorted(np.cumsum(shard_sizes), first, side="right"))
    array = int(np.searchsorted(np.cumsum([math.prod(s) for s in shapes]), first, side="right"))
    start = sum(shard_sizes[:shard])
    raise InputError(f"{paths[shard]}: holds {flat[first]} at position {first - start:,} (array "
                     f"{array} of {SHAPES_FILE}, shape {list(shapes[array])}); {bad.size:,} "
                     "numbers of the release are not finite: it is damaged")


class Layout(NamedTuple):
    """A release's sizes, as its `params_shapes.json` gives them."""

    n_positions: int
    n_tokens: int
    n_embd: int
    n_layer: int


def release_layout(shapes: list[Shape]) -> Layout:
    """The sizes of a release, after checking every shape against the original's layout."""
    if len(shapes) < 14 or (len(shapes) - 2) % len(LAYER_ARRAYS):
        raise InputError(f"{SHAPES_FILE}: expected positions, tokens and {len(LAYER_ARRAYS)} "
                         f"arrays per layer, got {len(shapes)} arrays")
    (positions, tokens), layers = shapes[:2], shapes[2:]
    if len(positions) != 2 or len(tokens) != 2 or positions[1] != tokens[1]:
        raise InputError(f"{SHAPES_FILE}: arrays 0 and 1 should be the position and token "
                         f"embeddings [n, d], got {list(positions)} and {list(tokens)}")
    d = tokens[1]
    n_layer = len(layers) // len(LAYER_ARRAYS)
    for i, (got, want) in enumerate(zip(layers, _layer_shapes(d) * n_layer, strict=True)):
        if got != want:
            layer, name = divmod(i, len(LAYER_ARRAYS))
            raise InputError(f"{SHAPES_FILE}: array {i + 2} (layer {layer} "
                             f"{LAYER_ARRAYS[name]}) has shape {list(got)}, expected {list(want)}")
    return Layout(positions[0], tokens[0], d, n_layer)


def release_config(shapes: list[Shape], n_ctx: int = 512, n_head: int = 12,
                   n_special: int = len(SPECIAL_TOKENS)) -> GPT1Config:
    """Our config for the release's shapes (`release_layout`), `n_special` token rows added."""
    layout = release_layout(shapes)
    if not 1 <= n_ctx <= layout.n_positions:
        raise InputError(f"n_ctx must be between 1 and the release's {layout.n_positions} "
                         f"positions, got {n_ctx}")
    if n_head < 1 or layout.n_embd % n_head:
        raise InputError(f"n_head must divide the embedding width {layout.n_embd}, got {n_head}")
    return GPT1Config.from_json({"vocab_size": layout.n_tokens + n_special, "n_ctx": n_ctx,
                                 "n_embd": layout.n_embd, "n_layer": layout.n_layer,
                                 "n_head": n_head}, SHAPES_FILE, defaults=True)


def special_rows(n_special: int, n_embd: int, seed: int) -> np.ndarray:
    """Token rows for the special tokens, drawn as `train.py` drew the rows it appended after the
    release's: N(0, 0.02) (the original's `np.random.randn(n_special, n_embd) * 0.02`, seeded
    here so that an import is reproducible)."""
    return np.random.default_rng(seed).normal(0.0, 0.02, (n_special, n_embd)).astype(np.float32)


def adapted(model: GPT1, n_ctx: int, n_special: int, seed: int,
            dropout: float | None = None) -> GPT1:
    """`model` with its positions cut to the first `n_ctx`, `n_special` new token rows from
    `special_rows` appended after its vocabulary, and (where given) `dropout` on embeddings,
    attention and residuals."""
    cfg = model.config
    if not 1 <= n_ctx <= cfg.n_ctx:
        raise InputError(f"n_ctx must be between 1 and the model's {cfg.n_ctx} positions, got "
                         f"{n_ctx}")
    state = model.state_dict()
    state["positions_embed.weight"] = state["positions_embed.weight"][:n_ctx]
    rows = torch.from_numpy(special_rows(n_special, cfg.n_embd, seed))
    state["tokens_embed.weight"] = torch.cat([state["tokens_embed.weight"], rows])
    pdrop = {} if dropout is None else {"embd_pdrop": dropout, "attn_pdrop": dropout,
                                        "resid_pdrop": dropout}
    with torch.device("meta"):  # no random init of weights about to be replaced
        out = GPT1(replace(cfg, vocab_size=cfg.vocab_size + n_special, n_ctx=n_ctx, **pdrop))
    out.load_state_dict({k: v.contiguous() for k, v in state.items()}, strict=True, assign=True)
    return out


def release_to_model(params: list[np.ndarray], n_ctx: int = 512, n_head: int = 12,
                     n_special: int = len(SPECIAL_TOKENS), seed: int = 0,
                     dropout: float | None = None) -> GPT1:
    """Our model holding the release's weights: its token rows followed by `n_special` new rows
    (`special_rows`), as `train.py` appended its special tokens; positions cut to `n_ctx`."""
    cfg = release_config([p.shape for p in params], n_ctx, n_head, n_special)  # checks them all
    positions, tokens, *layers = params
    arrays = {"positions_embed.weight": positions, "tokens_embed.weight": tokens}
    for i, array in enumerate(layers):
        layer, name = divmod(i, len(LAYER_ARRAYS))
        # a conv kernel [1, in, out] is the transpose of nn.Linear's (out, in)
        arrays[f"h.{layer}.{LAYER_ARRAYS[name]}"] = array[0].T if array.ndim == 3 else array
    with torch.device("meta"):
        model = GPT1(replace(cfg, vocab_size=tokens.shape[0], n_ctx=positions.shape[0]))
    state = {k: torch.from_numpy(np.ascontiguousarray(v, dtype=np.float32))
             for k, v in arrays.items()}
    model.load_state_dict(state, strict=True, assign=True)
    return adapted(model, n_ctx, n_special, seed, dropout)


Merge = tuple[str, str]


def checked_encoder(encoder: object, source: str) -> dict[str, int]:
    """`encoder` if it is a token -> id map with ids 0..n-1; ValueError naming `source` if not."""
    if not isinstance(encoder, dict) or sorted(encoder.values()) != list(range(len(encoder))):
        raise InputError(f"{source}: expected a token -> id map with ids 0..n-1")
    return encoder


def checked_merge(pair: tuple[str, ...], encoder: dict[str, int], where: str) -> Merge:
    """`pair` if it merges two tokens of `encoder` into a third; ValueError naming `where`."""
    if len(pair) != 2 or any(tok not in encoder for tok in (*pair, "".join(pair))):
        raise InputError(f"{where} {' '.join(pair)!r} is not a merge of two tokens of the "
                         "encoder into a third")
    return pair[0], pair[1]


def _read_merges(path: Path, encoder: dict[str, int]) -> list[Merge]:
    if not path.is_file():
        raise not_found(path)
    try:
        first, *lines = path.read_text(encoding="utf-8").split("\n")
    except UnicodeDecodeError as err:
        raise InputError(f"{path}: not UTF-8 text (byte {err.start})") from None
    if not first.startswith("#version"):
        raise InputError(f"{path}: line 1 should be the '#version' header, got {first[:40]!r}")
    return [checked_merge(tuple(line.split()), encoder, f"{path}: line {number}")
            for number, line in enumerate(lines, start=2) if line]


def gpt1_bpe(encoder: dict[str, int], merges: list[Merge]) -> Tokenizer:
    """GPT-1's BPE of `encoder` (token -> id, `<unk>` = 0) and `merges` (in rank order) as a
    `tokenizers` tokenizer, our special tokens appended after it.

    It splits words on spaces only, so that spaCy's newline tokens, which the original encodes as
    `\\n</w>`, stay words: on text without newlines it matches our own tokenizers' WhitespaceSplit.
    """
    tokenizer = Tokenizer(models.BPE(vocab=encoder, merges=merges, unk_token=UNK,
                                     end_of_word_suffix=END_OF_WORD))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Split(" ", behavior="removed")
    tokenizer.decoder = decoders.BPEDecoder(suffix=END_OF_WORD)
    tokenizer.add_special_tokens(list(SPECIAL_TOKENS))
    return tokenizer


def bpe_tokenizer(encoder_path: Path, merges_path: Path) -> Tokenizer:
    """`gpt1_bpe` of an encoder file (JSON) and a merges file (a `#version` line, then one merge
    per line in rank order). OpenAI's release names them `encoder_bpe_40000.json` and
    `vocab_40000.bpe`; a HuggingFace `openai-gpt` directory, `vocab.json` and `merges.txt`."""
    encoder = checked_encoder(_read_json(encoder_path), str(encoder_path))
    return gpt1_bpe(encoder, _read_merges(merges_path, encoder))


def release_tokenizer(release_dir: Path) -> Tokenizer:
    """The released BPE (`bpe_tokenizer` of the release's files)."""
    return bpe_tokenizer(Path(release_dir) / ENCODER_FILE, Path(release_dir) / MERGES_FILE)


def check_vocabulary(tokenizer: Tokenizer, token_rows: int, encoder_path: Path,
                     rows_source: str) -> None:
    """ValueError unless the model has a token row for each token of the encoder (before the
    special tokens, which come after both)."""
    n_tokens = tokenizer.get_vocab_size(with_added_tokens=False)
    if n_tokens != token_rows:
        raise InputError(f"{encoder_path}: {n_tokens} tokens, but {rows_source} has {token_rows} "
                         "token rows")


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
    check_vocabulary(tokenizer, cfg.vocab_size - len(SPECIAL_TOKENS),
                     release_dir / ENCODER_FILE, SHAPES_FILE)
    model = release_to_model(load_release_params(release_dir), n_ctx, n_head, seed=seed)
    with atomic_dir(out_dir) as tmp:
        save_model(model, tmp)
        tokenizer.save(str(tmp / "tokenizer.json"))
    return model.config
