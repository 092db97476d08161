"""A GPT-1 pretrained elsewhere as the pipeline's pretrained model (`pretrain.source`): OpenAI's
released weights, or a HuggingFace `openai-gpt` directory, which `gpt1 import-hf` also writes as
a model folder of ours (`import_hf`). Each comes with its own BPE, after which GPT-1's special
tokens are appended, with new token rows drawn as the original drew them
(`gpt1.interop.openai.special_rows`); a directory `gpt1 export-hf` wrote has those tokens and
their rows already (`carried_special_rows`), and keeps them. For `pretrain.source`, the
architecture its files state is checked against `params.yaml`'s model section before any weight
is read: what it says is what is fine-tuned."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tokenizers import Tokenizer

from gpt1.atomic import atomic_dir, check_replaceable
from gpt1.config import ModelParams, Source
from gpt1.corpus.tokenizer import END_OF_WORD, SPECIAL_TOKENS
from gpt1.errors import InputError, MissingInputError, not_found
from gpt1.interop.hf import MODEL_DIR_FILES, load_hf_model, read_hf_config
from gpt1.interop.openai import (
    ENCODER_FILE,
    SHAPES_FILE,
    adapted,
    bpe_tokenizer,
    check_vocabulary,
    checked_encoder,
    checked_merge,
    gpt1_bpe,
    load_release_params,
    read_shapes,
    release_layout,
    release_to_model,
    release_tokenizer,
)
from gpt1.model.registry import TOKENIZER, save_model
from gpt1.model.transformer import GPT1, GPT1Config

# An HF directory's tokenizer: the release's encoder and merges renamed (the hub's openai-gpt,
# transformers before 5), or the same two in a `tokenizers` file (transformers 5's save_pretrained)
HF_ENCODER, HF_MERGES, HF_TOKENIZER = "vocab.json", "merges.txt", "tokenizer.json"


@dataclass(frozen=True)
class Architecture:
    """What a pretrained model's files say of its shape."""

    n_positions: int
    n_embd: int
    n_layer: int
    n_head: int | None  # None where the files do not say (OpenAI's release)


def check_architecture(found: Architecture, model: ModelParams, source: Path) -> None:
    """ValueError naming each key of `model` (params.yaml's model section) that the model in
    `source` does not match: its width, depth and heads, and positions for model.n_ctx."""
    problems = []
    if found.n_positions < model.n_ctx:
        problems.append(f"it has {found.n_positions} positions, fewer than model.n_ctx "
                        f"({model.n_ctx}): set model.n_ctx to at most {found.n_positions}")
    for key in ("n_embd", "n_layer", "n_head"):
        theirs, ours = getattr(found, key), getattr(model, key)
        if theirs is not None and theirs != ours:
            problems.append(f"its {key} is {theirs}, model.{key} is {ours}: set model.{key}="
                            f"{theirs}")
    if problems:
        raise InputError(f"{source}: this model does not fit params.yaml's model section "
                         f"({'; '.join(problems)})")


@dataclass(frozen=True)
class Pretrained:
    """A pretrained model ready for fine-tuning: GPT-1's special tokens have token rows, and its
    tokenizer encodes them after its own vocabulary."""

    model: GPT1
    tokenizer: Tokenizer


def import_pretrained(source: Source, folder: Path, model: ModelParams,
                      seed: int) -> Pretrained:
    """The model in `folder`: OpenAI's release (`openai`: params_shapes.json, params_*.npy,
    encoder_bpe_40000.json, vocab_40000.bpe) or a HuggingFace directory (`hf`: config.json,
    model.safetensors or pytorch_model.bin, and vocab.json with merges.txt or tokenizer.json),
    checked against `model`, its positions cut to `model.n_ctx`, with `model.dropout`; the new
    token rows drawn with `seed` (none for an HF directory that has them already:
    `carried_special_rows`)."""
    folder = Path(folder)
    if source == "train":
        raise ValueError("pretrain.source train pretrains here: there is nothing to import")
    if not folder.is_dir():
        raise not_found(folder, " (pretrain.source_dir)")
    if source == "openai":
        return _openai_release(folder, model, seed)
    return _hf_directory(folder, model, seed)


def _openai_release(folder: Path, model: ModelParams, seed: int) -> Pretrained:
    layout = release_layout(read_shapes(folder))
    check_architecture(Architecture(layout.n_positions, layout.n_embd, layout.n_layer, None),
                       model, folder / SHAPES_FILE)
    tokenizer = release_tokenizer(folder)
    check_vocabulary(tokenizer, layout.n_tokens, folder / ENCODER_FILE, SHAPES_FILE)
    weights = release_to_model(load_release_params(folder), model.n_ctx, model.n_head,
                               seed=seed, dropout=model.dropout)
    return Pretrained(weights, tokenizer)


def _hf_directory(folder: Path, model: ModelParams, seed: int) -> Pretrained:
    cfg = read_hf_config(folder)
    check_architecture(Architecture(cfg.n_ctx, cfg.n_embd, cfg.n_layer, cfg.n_head), model,
                       folder / "config.json")
    pretrained, _ = _hf_pretrained(folder, cfg, model.n_ctx, seed, model.dropout)
    return pretrained


def _hf_pretrained(folder: Path, cfg: GPT1Config, n_ctx: int, seed: int,
                   dropout: float | None) -> tuple[Pretrained, list[str]]:
    """The model of config `cfg` in HF directory `folder` with its tokenizer, GPT-1's special
    tokens after its BPE (`hf_tokenizer`, `carried_special_rows`), positions cut to `n_ctx`;
    and the weights left out (`load_hf_model`)."""
    tokenizer, tokenizer_path = hf_tokenizer(folder)
    n_tokens = tokenizer.get_vocab_size(with_added_tokens=False)
    carried = carried_special_rows(tokenizer_path, n_tokens, cfg.vocab_size)
    check_vocabulary(tokenizer, cfg.vocab_size - carried, tokenizer_path,
                     "config.json (vocab_size)")
    base, ignored = load_hf_model(folder, cfg)
    weights = adapted(base, n_ctx, len(SPECIAL_TOKENS) - carried, seed, dropout)
    return Pretrained(weights, tokenizer), ignored


def import_hf(hf_dir: Path, out_dir: Path, seed: int = 0, force: bool = False) -> list[str]:
    """Write the HF `openai-gpt` directory `hf_dir` as our model folder `out_dir`
    (`config.json`, `model.safetensors`, `tokenizer.json`: what `gpt1 generate`, `export-hf`
    and fine-tuning load), its special tokens' rows carried or drawn with `seed`; returns the
    weights left out. Reads `config.json`, `model.safetensors` (or `pytorch_model.bin`) and the
    tokenizer (`hf_tokenizer`). An existing `out_dir` holding more than `MODEL_DIR_FILES` is
    refused, unless `force`; it is replaced atomically."""
    hf_dir, out_dir = Path(hf_dir), Path(out_dir)
    check_replaceable(out_dir, MODEL_DIR_FILES, force)
    cfg = read_hf_config(hf_dir)
    pretrained, ignored = _hf_pretrained(hf_dir, cfg, cfg.n_ctx, seed, dropout=None)
    with atomic_dir(out_dir) as tmp:
        save_model(pretrained.model, tmp)
        pretrained.tokenizer.save(str(tmp / TOKENIZER))
    return ignored


def carried_special_rows(tokenizer_path: Path, n_tokens: int, token_rows: int) -> int:
    """How many of GPT-1's special tokens an HF directory's model has token rows for already:
    all of them where its `tokenizer.json` lists them, in GPT-1's order, right after its
    `n_tokens` tokens, and the model has `token_rows` = `n_tokens` + one row for each (what
    `gpt1 export-hf` writes: our model's own rows for them, which are kept); else none (the
    released layout, whose rows an import appends)."""
    if tokenizer_path.name != HF_TOKENIZER or token_rows != n_tokens + len(SPECIAL_TOKENS):
        return 0
    added = json.loads(tokenizer_path.read_text(encoding="utf-8")).get("added_tokens")
    ids = ({entry.get("content"): entry.get("id") for entry in added if isinstance(entry, dict)}
           if isinstance(added, list) else {})
    wanted = {token: n_tokens + i for i, token in enumerate(SPECIAL_TOKENS)}
    return len(SPECIAL_TOKENS) if all(ids.get(t) == i for t, i in wanted.items()) else 0


def hf_tokenizer(folder: Path) -> tuple[Tokenizer, Path]:
    """GPT-1's BPE (`gpt1_bpe`) of an HF `openai-gpt` directory's vocabulary and merges, from
    `vocab.json` and `merges.txt`, or else from `tokenizer.json`; and the file that gave the
    vocabulary. Only the BPE is taken: text is cleaned as the original cleaned it (ftfy, its
    standardisation, spaCy), where transformers' fast tokenizer uses BERT's normaliser."""
    encoder_path, merges_path = folder / HF_ENCODER, folder / HF_MERGES
    if encoder_path.is_file() or merges_path.is_file():
        return bpe_tokenizer(encoder_path, merges_path), encoder_path
    path = folder / HF_TOKENIZER
    if not path.is_file():
        raise MissingInputError(f"{folder}: no tokenizer: expected {HF_ENCODER} and {HF_MERGES}, "
                                f"or {HF_TOKENIZER} (OpenAIGPTTokenizer.save_pretrained writes "
                                "them)")
    try:
        bpe = json.loads(path.read_text(encoding="utf-8"))["model"]
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as err:
        raise InputError(f"{path}: not a tokenizers file ({type(err).__name__}: {err})") from None
    if not isinstance(bpe, dict) or bpe.get("type") != "BPE" or bpe.get("end_of_word_suffix") \
            != END_OF_WORD:
        raise InputError(f"{path}: not GPT-1's BPE (a BPE model with {END_OF_WORD!r} word ends)")
    encoder = checked_encoder(bpe.get("vocab"), f"{path}: model.vocab")
    merges = [checked_merge(tuple(m.split(" ") if isinstance(m, str) else m), encoder,
                            f"{path}: model.merges[{i}]")
              for i, m in enumerate(bpe.get("merges", []))]
    return gpt1_bpe(encoder, merges), path
