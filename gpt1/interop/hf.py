"""Convert between our model directories and HuggingFace `openai-gpt` checkpoints.

A pretrained model is exported as an `OpenAIGPTLMHeadModel`; a fine-tuned model
(`gpt1.downstream.standalone`) of classification or entailment as an
`OpenAIGPTForSequenceClassification`, its head's bias folded into the bias-free `score`
(`fold_head_bias`), of multiple choice as an `OpenAIGPTDoubleHeadsModel`; a similarity head has
no transformers class (`NO_HF_CLASS`).

The parameter names are already HF's. What differs: HF's LM and double-heads models put the trunk
under `transformer.`, HF's `Conv1D` stores a projection as (in, out) where our `nn.Linear` stores
(out, in), and the LM head, tied to the token embedding in both, is saved by HF under
`transformer.tokens_embed.weight` (LM head model) or `lm_head.weight` (double-heads model).
Nothing here imports transformers; loading executes no code (JSON, safetensors, and
`torch.load(weights_only=True)`).
"""

from __future__ import annotations

import json
import math
import pickle
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from tokenizers import Tokenizer, processors

from gpt1.atomic import atomic_dir, check_replaceable
from gpt1.config import Family
from gpt1.corpus.tokenizer import CLASSIFY, DELIM, PAD, START, UNK, GPT1Tokenizer
from gpt1.errors import InputError, not_found
from gpt1.model.registry import (
    TOKENIZER,
    load_model,
    load_safetensors,
    load_tokenizer,
    save_safetensors,
)
from gpt1.model.transformer import GPT1, GPT1Config
from gpt1.model.trunk import Trunk

if TYPE_CHECKING:
    from gpt1.downstream.standalone import Finetuned, TaskCard

PREFIX = "transformer."
LM_HEAD = "lm_head.weight"
CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
# transformers' modeling_openai maps afn "gelu" to gelu_new, the tanh approximation we use
HF_AFN = "gelu"
REQUIRED = ("vocab_size", "n_positions", "n_embd", "n_layer", "n_head")
# absent from a config.json, these take HF's defaults, which are also GPT1Config's
OPTIONAL = ("embd_pdrop", "attn_pdrop", "resid_pdrop", "layer_norm_epsilon", "initializer_range")
# heads of other HF models, over the same trunk, that our LM has no place for
OTHER_HEADS = ("multiple_choice_head.", "score.")
# the causal mask older transformers saved as a buffer in each layer
MASK_BUFFER = re.compile(r"h\.\d+\.attn\.bias")
# the first sentence of torch's reason for refusing a pickle under weights_only=True
UNPICKLER_REASON = re.compile(r"WeightsUnpickler error:\s*(.+?)(?:\.\s|\.?$)", re.MULTILINE)
# what import-hf and import-openai write (export-hf: these, the tokenizer's config and a fine-tuned
# model's task.json): an --out holding anything else is refused
MODEL_DIR_FILES = ("config.json", "model.safetensors", "tokenizer.json")
TOKENIZER_CONFIG = "tokenizer_config.json"
# Without a tokenizer_class, AutoTokenizer builds an openai-gpt model's OpenAIGPTTokenizer, which
# replaces our tokenizer.json's lower-casing and whitespace split by BERT's normaliser and
# pre-tokeniser (accents stripped, punctuation split off): other ids. This class loads it as is.
HF_TOKENIZER_CLASS = "PreTrainedTokenizerFast"
HF_SPECIAL_TOKENS = {"unk_token": UNK, "bos_token": START, "sep_token": DELIM,
                     "cls_token": CLASSIFY, "pad_token": PAD}
# The dropout before the exported multiple-choice head: the folder does not record finetune's
# clf_dropout, so the paper's (transformers' default too); it changes nothing in eval mode.
PAPER_CLF_DROPOUT = 0.1
MC_HEAD = "multiple_choice_head.summary."
# why a fine-tuned family's head has no class in transformers' modeling_openai
NO_HF_CLASS: dict[Family, str] = {
    "similarity": "its head adds the <classify> states of both orders of the pair before its "
                  "linear layer",
}
# exported as OpenAIGPTForSequenceClassification: one logit per label from the <classify> state
SEQUENCE_CLASSIFICATION: tuple[Family, ...] = ("classification", "entailment")
SCORE = "score.weight"
# the folded score's logits may differ from our head's by this much on the probes, no more
FOLD_TOLERANCE = 1e-4
# the probes of the fold: seeded random sequences `<start> ... <classify>`, one forward pass
PROBES, PROBE_MAX_LEN, PROBE_SEED = 64, 32, 0
# the exported tokenizer's post-processor (add_special_tokens=True, transformers' default): a
# text as classification lays it out, a text pair as entailment does
SINGLE_TEMPLATE = f"{START} $A {CLASSIFY}"
PAIR_TEMPLATE = f"{START} $A {DELIM} $B {CLASSIFY}"


def to_hf_config(cfg: GPT1Config) -> dict[str, Any]:
    """The `config.json` of an `OpenAIGPTLMHeadModel` with our architecture and dropouts."""
    return {
        "architectures": ["OpenAIGPTLMHeadModel"],
        "model_type": "openai-gpt",
        "vocab_size": cfg.vocab_size,
        "n_positions": cfg.n_ctx,
        "n_embd": cfg.n_embd,
        "n_layer": cfg.n_layer,
        "n_head": cfg.n_head,
        "afn": HF_AFN,
        "embd_pdrop": cfg.embd_pdrop,
        "attn_pdrop": cfg.attn_pdrop,
        "resid_pdrop": cfg.resid_pdrop,
        "layer_norm_epsilon": cfg.layer_norm_epsilon,
        "initializer_range": cfg.initializer_range,
        "tie_word_embeddings": True,
    }


def from_hf_config(hf: dict[str, Any], source: str = "config") -> GPT1Config:
    """Our config from an HF `openai-gpt` config; ValueError names any value we cannot honour."""
    if hf.get("model_type") != "openai-gpt":
        raise InputError(f"{source}: model_type {hf.get('model_type')!r}, expected 'openai-gpt'")
    for key in REQUIRED:
        if key not in hf:
            raise InputError(f"{source}: missing key {key!r}")
    unsupported = {
        "afn": (hf.get("afn", HF_AFN) != HF_AFN, f"only {HF_AFN!r} (the tanh GELU) is supported"),
        # pytorch-pretrained-bert counted special-token rows apart from vocab_size
        "n_special": (hf.get("n_special", 0) != 0, "special tokens must be counted in vocab_size"),
        "n_ctx": (hf.get("n_ctx", hf["n_positions"]) != hf["n_positions"],
                  "it must equal n_positions (one position embedding per context slot)"),
        "tie_word_embeddings": (not hf.get("tie_word_embeddings", True),
                                "our LM head is tied to the token embedding"),
    }
    for key, (bad, why) in unsupported.items():
        if bad:
            raise InputError(f"{source}: unsupported {key}={hf.get(key)!r}: {why}")
    # through the checks our own config.json gets: what is imported, every command loads
    ours = {"vocab_size": hf["vocab_size"], "n_ctx": hf["n_positions"], "n_embd": hf["n_embd"],
            "n_layer": hf["n_layer"], "n_head": hf["n_head"],
            **{key: hf[key] for key in OPTIONAL if key in hf}}
    return GPT1Config.from_json(ours, source, defaults=True)


def to_hf_state_dict(model: GPT1) -> dict[str, torch.Tensor]:
    """Our weights under `OpenAIGPTLMHeadModel`'s names and layouts.

    `lm_head.weight` is left out, as HF's own `save_pretrained` leaves it out: it is tied.
    """
    return {
        PREFIX + k: (v.T if k.endswith(CONV1D) else v).detach().cpu().contiguous()
        for k, v in model.state_dict().items()
    }


def _strip_prefix(sd: dict[str, torch.Tensor], source: str) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    for key, tensor in sd.items():
        name = key.removeprefix(PREFIX)
        if name in out:
            raise InputError(f"{source}: {name!r} appears with and without {PREFIX!r}")
        out[name] = tensor
    return out


def _is_causal_mask(tensor: torch.Tensor, n_ctx: int) -> bool:
    return torch.equal(tensor.float(), torch.ones(n_ctx, n_ctx).tril().view(1, 1, n_ctx, n_ctx))


def from_hf_state_dict(sd: dict[str, torch.Tensor], cfg: GPT1Config,
                       source: str = "state dict") -> tuple[GPT1, list[str]]:
    """Our model from an HF `openai-gpt` state dict (bare, LM head or double heads).

    Returns the model and the keys it left out: other models' heads and saved causal masks.
    """
    sd = _strip_prefix(sd, source)
    if LM_HEAD in sd:
        head = sd.pop(LM_HEAD)
        embed = sd.setdefault("tokens_embed.weight", head)
        if not torch.equal(head, embed):
            raise InputError(f"{source}: {LM_HEAD} differs from tokens_embed.weight; "
                             "an untied LM head is not supported")
    for key in [k for k in sd if MASK_BUFFER.fullmatch(k)]:
        if not _is_causal_mask(sd[key], cfg.n_ctx):
            raise InputError(f"{source}: {key} is not the causal mask of n_positions={cfg.n_ctx}")
    ignored = sorted(k for k in sd if k.startswith(OTHER_HEADS) or MASK_BUFFER.fullmatch(k))
    sd = {k: v for k, v in sd.items() if k not in ignored}

    model = GPT1(cfg)
    expected = model.state_dict()
    unexpected = sorted(set(sd) - set(expected))
    if unexpected:
        raise InputError(f"{source}: unexpected weights {unexpected} (not an openai-gpt model)")
    converted = {}
    for key, ours in expected.items():
        if key not in sd:
            raise InputError(f"{source}: missing weight {key!r} (with or without {PREFIX!r})")
        is_conv = key.endswith(CONV1D)
        want = ours.T.shape if is_conv else ours.shape
        if sd[key].shape != want:
            raise InputError(f"{source}: {key} has shape {tuple(sd[key].shape)}, "
                             f"expected {tuple(want)} for this config")
        converted[key] = sd[key].T if is_conv else sd[key]
    model.load_state_dict(converted)
    return model, ignored


def _read_hf_weights(hf_dir: Path) -> tuple[dict[str, torch.Tensor], Path]:
    safetensors_path, bin_path = hf_dir / "model.safetensors", hf_dir / "pytorch_model.bin"
    if safetensors_path.is_file():
        return load_safetensors(safetensors_path), safetensors_path
    if bin_path.is_file():
        try:
            sd = torch.load(bin_path, map_location="cpu", weights_only=True)
        except pickle.UnpicklingError as err:
            # only torch's reason: the rest of its message suggests weights_only=False, which
            # would run whatever code the file holds
            found = UNPICKLER_REASON.search(str(err))
            why = f" ({found[1]})" if found else ""
            raise InputError(f"{bin_path}: torch.load(weights_only=True) refuses it{why}; "
                             "convert it to model.safetensors") from None
        except Exception as err:  # a cut-short or garbled file fails in many ways
            first_line = str(err).strip().partition("\n")[0]
            what = f"{type(err).__name__}: {first_line}" if first_line else type(err).__name__
            raise InputError(f"{bin_path}: not a readable PyTorch file ({what})") from None
        if not isinstance(sd, dict):
            raise InputError(f"{bin_path}: expected a state dict, found {type(sd).__name__}")
        return sd, bin_path
    raise not_found(safetensors_path, f" (nor {bin_path.name})")


def to_hf_double_heads_config(cfg: GPT1Config, pad_id: int) -> dict[str, Any]:
    """The `config.json` of an `OpenAIGPTDoubleHeadsModel` whose `multiple_choice_head` is our
    multiple-choice head: dropout, then a linear layer n_embd -> 1 with a bias, on the state at
    `mc_token_ids` (the `<classify>` token), no activation."""
    return {
        **to_hf_config(cfg),
        "architectures": ["OpenAIGPTDoubleHeadsModel"],
        "summary_type": "cls_index",
        "summary_use_proj": True,
        "summary_proj_to_labels": True,
        "num_labels": 1,
        "summary_activation": None,
        "summary_first_dropout": PAPER_CLF_DROPOUT,
        "pad_token_id": pad_id,
    }


def to_hf_sequence_classification_config(cfg: GPT1Config, labels: list[str],
                                         pad_id: int) -> dict[str, Any]:
    """The `config.json` of an `OpenAIGPTForSequenceClassification` of our labels: its `score`
    reads the state of each row's last token that is not `pad_id`, our `<classify>`."""
    return {
        **to_hf_config(cfg),
        "architectures": ["OpenAIGPTForSequenceClassification"],
        "num_labels": len(labels),
        "id2label": {str(i): label for i, label in enumerate(labels)},
        "label2id": {label: i for i, label in enumerate(labels)},
        "problem_type": "single_label_classification",
        "pad_token_id": pad_id,
    }


def fold_head_bias(weight: torch.Tensor, bias: torch.Tensor, gamma: torch.Tensor,
                   beta: torch.Tensor) -> tuple[torch.Tensor, float]:
    """A bias-free weight W' for the head x -> W x + b on the outputs of a LayerNorm of gain
    `gamma` and bias `beta`, in float64, and c = sum(beta / gamma).

    The LayerNorm's output is h = gamma * n + beta with sum(n) = 0, so sum(h / gamma) = c for
    every input; with u = (1 / gamma) / c, u.h = 1, and W' = W + b u^T gives W'h = W h + b.
    Exact in exact arithmetic; in floating point the error grows as c nears 0 (and is infinite
    where c or a gain is 0).
    """
    inv = 1.0 / gamma.double()
    c = float((beta.double() * inv).sum())
    return weight.double() + bias.double()[:, None] * (inv / c)[None, :], c


def _probes(tok: GPT1Tokenizer, vocab_size: int, n_ctx: int) -> tuple[torch.Tensor, torch.Tensor]:
    """`PROBES` seeded sequences `<start> ... <classify>` of random ids (no `<pad>`), of lengths
    2 to `PROBE_MAX_LEN`, right-padded: ids (PROBES, T) and lengths."""
    gen = torch.Generator().manual_seed(PROBE_SEED)
    longest = min(n_ctx, PROBE_MAX_LEN)
    lengths = torch.randint(min(2, longest), longest + 1, (PROBES,), generator=gen)
    lengths[0] = longest
    ids = torch.randint(0, vocab_size, (PROBES, longest), generator=gen)
    ids[ids == tok.pad_id] = tok.unk_id
    rows = torch.arange(PROBES)
    ids[:, 0] = tok.start_id
    ids[rows, lengths - 1] = tok.classify_id
    ids[torch.arange(longest)[None, :] >= lengths[:, None]] = tok.pad_id
    return ids, lengths


def _fold_error(finetuned: Finetuned, score: torch.Tensor) -> float:
    """The largest |difference| between our head's logits and `score`'s (no bias) on the
    trunk's `<classify>` states of the probes: one forward pass, fp32, eval mode."""
    model = finetuned.model.eval()
    ids, lengths = _probes(finetuned.tokenizer, model.trunk.config.vocab_size,
                           model.trunk.config.n_ctx)
    with torch.no_grad():
        ours, hidden = model(ids, lengths, 1)
        folded = hidden[torch.arange(len(ids)), lengths - 1] @ score.T
    return float((ours - folded).abs().max())


def _sequence_classification_score(finetuned: Finetuned, trunk: GPT1,
                                   model_dir: Path) -> torch.Tensor:
    """`score.weight` (float32) computing our head, bias folded in (`fold_head_bias`), checked on
    the probes to `FOLD_TOLERANCE`; InputError, in one line, where it does not fold."""
    card, head = finetuned.card, finetuned.model.head

    def refused(why: str) -> InputError:
        return InputError(f"{model_dir}: task {card.task!r} is a {card.spec.family} model whose "
                          "head's bias does not fold into OpenAIGPTForSequenceClassification's "
                          f"bias-free score: {why}")

    if not len(trunk.h):
        raise refused("the trunk has no blocks, so its last states are no LayerNorm's output")
    norm = trunk.h[-1].ln_2
    gamma, beta = norm.weight.detach().cpu(), norm.bias.detach().cpu()
    zeros = int((gamma == 0).sum())
    if zeros:
        raise refused(f"{zeros} of the {gamma.numel()} gains of the last LayerNorm are 0")
    folded, c = fold_head_bias(head.weight.detach().cpu(), head.bias.detach().cpu(), gamma, beta)
    score = folded.float().contiguous()
    if c == 0 or not math.isfinite(c) or not bool(torch.isfinite(score).all()):
        raise refused(f"the last LayerNorm's sum(beta/gamma) is {c:.3g}, which the fold divides "
                      "by (no difference measurable)")
    diff = _fold_error(finetuned, score)
    if not diff <= FOLD_TOLERANCE:  # NaN included
        raise refused(f"the folded head's logits differ from ours by up to {diff:.2e} (over "
                      f"{FOLD_TOLERANCE:.0e}) on {PROBES} probe sequences: the last LayerNorm's "
                      f"sum(beta/gamma), {c:.3g}, is too close to 0")
    return score


def _templated_tokenizer(source: Path, dest: Path) -> None:
    """Our tokenizer, with a post-processor that lays a text out as classification does and a
    pair as entailment does when transformers adds special tokens (its default)."""
    backend = Tokenizer.from_file(str(source))
    backend.post_processor = processors.TemplateProcessing(
        single=SINGLE_TEMPLATE, pair=PAIR_TEMPLATE,
        special_tokens=[(tok, backend.token_to_id(tok)) for tok in (START, DELIM, CLASSIFY)])
    backend.save(str(dest))


def _tokenizer_config(n_ctx: int) -> str:
    return json.dumps({"tokenizer_class": HF_TOKENIZER_CLASS, **HF_SPECIAL_TOKENS,
                       "model_max_length": n_ctx}, indent=2) + "\n"


def _check_exportable(card: TaskCard, model_dir: Path) -> None:
    """InputError, in one line, where no transformers class computes the card's head."""
    why = NO_HF_CLASS.get(card.spec.family)
    if why is not None:
        raise InputError(f"{model_dir}: task {card.task!r} is a {card.spec.family} model, which no "
                         f"transformers class computes: {why}; classification and entailment "
                         "models export (as OpenAIGPTForSequenceClassification), multiple_choice "
                         "ones too (as OpenAIGPTDoubleHeadsModel)")


def _gpt1(trunk: Trunk, model_dir: Path) -> GPT1:
    if not isinstance(trunk, GPT1):
        raise InputError(f"{model_dir}: a {trunk.config.model_type} trunk; only gpt1 trunks have "
                         "a HuggingFace openai-gpt counterpart")
    return trunk


def export_hf(model_dir: Path, out_dir: Path, force: bool = False) -> Path:
    """Write our model in `model_dir` as a transformers directory; returns `out_dir`.

    A pretrained model becomes an `OpenAIGPTLMHeadModel`, with its `tokenizer.json` where it has
    one. A fine-tuned folder (with `task.json`) becomes, with its tokenizer and `task.json`: of
    classification or entailment, an `OpenAIGPTForSequenceClassification` whose `score` is our
    head with its bias folded in (`fold_head_bias`, checked on probe sequences; refused where it
    does not fold to `FOLD_TOLERANCE`), its tokenizer given the family's layout as its
    post-processor; of multiple choice, an `OpenAIGPTDoubleHeadsModel`; similarity is refused
    (`NO_HF_CLASS`). `tokenizer_config.json` makes `AutoTokenizer` load `tokenizer.json` as it
    is. An existing `out_dir` holding more than the files it writes is refused, unless `force`.
    """
    # imported here: the pretrain stage imports this module (gpt1.interop.source), and
    # fine-tuning's code is no dependency of it
    from gpt1.downstream.standalone import CARD, load_finetuned, read_card

    check_replaceable(out_dir, (*MODEL_DIR_FILES, TOKENIZER_CONFIG, CARD), force)
    templated = False
    if (model_dir / CARD).is_file():
        card = read_card(model_dir)
        _check_exportable(card, model_dir)
        finetuned = load_finetuned(model_dir)
        trunk = _gpt1(finetuned.model.trunk, model_dir)
        pad_id = finetuned.tokenizer.pad_id
        if card.spec.family in SEQUENCE_CLASSIFICATION:
            assert card.spec.labels is not None  # these families are never regressions
            config = to_hf_sequence_classification_config(trunk.config, card.spec.labels, pad_id)
            weights = {**to_hf_state_dict(trunk),
                       SCORE: _sequence_classification_score(finetuned, trunk, model_dir)}
            templated = True
        else:
            config = to_hf_double_heads_config(trunk.config, pad_id)
            weights = {**to_hf_state_dict(trunk),
                       **{MC_HEAD + k: v.detach().cpu().contiguous()
                          for k, v in finetuned.model.head.state_dict().items()}}
        copied = (TOKENIZER, CARD)
    else:
        copied = (TOKENIZER,) if (model_dir / TOKENIZER).is_file() else ()
        if copied:
            load_tokenizer(model_dir)  # read to check it against the model, then copied
        trunk = _gpt1(load_model(model_dir), model_dir)
        config, weights = to_hf_config(trunk.config), to_hf_state_dict(trunk)
    with atomic_dir(out_dir) as tmp:
        (tmp / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        save_safetensors(weights, tmp / "model.safetensors")
        for name in copied:
            if name == TOKENIZER and templated:
                _templated_tokenizer(model_dir / name, tmp / name)
            else:
                shutil.copyfile(model_dir / name, tmp / name)
        if TOKENIZER in copied:
            (tmp / TOKENIZER_CONFIG).write_text(_tokenizer_config(trunk.config.n_ctx))
    return out_dir


def read_hf_config(hf_dir: Path) -> GPT1Config:
    """Our config from the `config.json` of an HF `openai-gpt` directory (`from_hf_config`)."""
    config_path = Path(hf_dir) / "config.json"
    if not config_path.is_file():
        raise not_found(config_path)
    try:
        hf_config = json.loads(config_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise InputError(f"{config_path}: not JSON ({err})") from None
    if not isinstance(hf_config, dict):
        raise InputError(f"{config_path}: expected a JSON object")
    return from_hf_config(hf_config, str(config_path))


def load_hf_model(hf_dir: Path, cfg: GPT1Config) -> tuple[GPT1, list[str]]:
    """Our model from the weights of an HF `openai-gpt` directory (`model.safetensors` or
    `pytorch_model.bin`) of config `cfg`; returns it and the keys it left out."""
    sd, weights_path = _read_hf_weights(Path(hf_dir))
    for key, tensor in sd.items():
        if (isinstance(tensor, torch.Tensor) and tensor.is_floating_point()
                and not bool(torch.isfinite(tensor).all())):
            count = int((~torch.isfinite(tensor)).sum())
            raise InputError(f"{weights_path}: {key} holds {count:,} numbers that are not "
                             "finite (NaN or infinity): the checkpoint is damaged")
    return from_hf_state_dict(sd, cfg, str(weights_path))

