"""The trunks by `model_type`, and model folders (`config.json` + `model.safetensors`, and the
`tokenizer.json` a language model reads) saved and loaded through them, their files checked
against each other. Adding a trunk: its module, and one line in `TRUNKS`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch

from gpt1.corpus.tokenizer import GPT1Tokenizer
from gpt1.errors import InputError, not_found
from gpt1.model.lstm import LSTM
from gpt1.model.transformer import GPT1
from gpt1.model.trunk import Trunk, TrunkConfig

TRUNKS: dict[str, type[Trunk]] = {
    "gpt1": GPT1,
    "lstm": LSTM,
}
# the type of a config.json written before trunks were told apart: they were all GPT-1
UNTYPED_MODEL_TYPE = "gpt1"
TOKENIZER = "tokenizer.json"


def _trunk_class(model_type: str, where: str) -> type[Trunk]:
    if model_type not in TRUNKS:
        raise InputError(f"{where}: model_type {model_type!r} is no trunk of ours "
                         f"(known: {sorted(TRUNKS)})")
    return TRUNKS[model_type]


def build_trunk(config: TrunkConfig) -> Trunk:
    """A freshly initialised trunk of `config`'s type."""
    return _trunk_class(config.model_type, type(config).__name__)(config)


def load_config(path: Path) -> TrunkConfig:
    """The config in a `config.json` written by `TrunkConfig.save`, of the trunk its
    `model_type` names; ValueError names the file and the key at fault."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise InputError(f"{path}: not JSON ({err})") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object, found {type(data).__name__}")
    model_type = data.pop("model_type", UNTYPED_MODEL_TYPE)
    return _trunk_class(model_type, str(path)).config_class.from_json(data, path)


def save_safetensors(tensors: dict[str, torch.Tensor], path: Path) -> None:
    """Write `tensors` (moved to the CPU) as a safetensors file with the usual file mode.

    The bytes are written here rather than by `safetensors.torch.save_file`, whose file is mode
    0600: a model shared on a multi-user machine must be readable by the others.
    """
    from safetensors.torch import save

    cpu = {k: v.detach().cpu().contiguous() for k, v in tensors.items()}
    path.write_bytes(save(cpu, metadata={"format": "pt"}))


def load_safetensors(path: Path, device: str = "cpu") -> dict[str, torch.Tensor]:
    """The tensors of a safetensors file; ValueError, naming it, when it is cut short or garbled."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        return load_file(str(path), device=device)
    except SafetensorError as err:
        raise InputError(f"{path}: not a readable safetensors file ({err})") from None


def save_model(model: Trunk, out_dir: Path) -> None:
    """`config.json` (with the trunk's `model_type`) + `model.safetensors`."""
    model.config.save(out_dir / "config.json")
    save_safetensors(model.state_dict(), out_dir / "model.safetensors")


def _check_files(model_dir: Path, *names: str) -> None:
    for name in names:
        if not (model_dir / name).is_file():
            raise not_found(model_dir / name, " (run the pretrain stage first)")


def load_model(model_dir: Path, map_location: str | torch.device = "cpu") -> Trunk:
    """Rebuild a model saved by `save_model`, as the trunk its config names; loading executes no
    code (safetensors + JSON)."""
    config_path, weights_path = model_dir / "config.json", model_dir / "model.safetensors"
    _check_files(model_dir, config_path.name, weights_path.name)
    model = build_trunk(load_config(config_path))
    state = load_safetensors(weights_path, device=str(map_location))
    expected = model.state_dict()
    if state.keys() != expected.keys():
        missing, extra = sorted(expected.keys() - state.keys()), sorted(state.keys() - expected)
        hint = ("; a fine-tuned classifier keeps its trunk under 'trunk.'"
                if any(key.startswith("trunk.") for key in extra) else "")
        raise InputError(f"{weights_path}: not the {model.config.model_type} trunk "
                         f"{config_path.name} describes ({len(missing)} weights missing, e.g. "
                         f"{missing[:2]}; {len(extra)} unexpected, e.g. {extra[:2]}){hint}")
    for key, tensor in expected.items():
        if state[key].shape != tensor.shape:
            raise InputError(f"{weights_path}: {key} has shape {tuple(state[key].shape)}, but "
                             f"{config_path.name} makes it {tuple(tensor.shape)}")
    model.load_state_dict(state)
    return model


def check_tokenizer(config: TrunkConfig, tokenizer: GPT1Tokenizer, model_dir: Path) -> None:
    """InputError unless the tokenizer in `model_dir` has one token for each row of the token
    table its `config.json` gives the model: fewer tokens leave rows no text reaches, more give
    ids past the table's end."""
    if tokenizer.vocab_size != config.vocab_size:
        raise InputError(f"{model_dir / TOKENIZER}: {tokenizer.vocab_size:,} tokens, but "
                         f"{model_dir / 'config.json'} gives the model {config.vocab_size:,} "
                         "token rows (vocab_size): the two are not one model's")


def load_tokenizer(model_dir: Path) -> GPT1Tokenizer:
    """The `tokenizer.json` of a model folder, checked against its `config.json`
    (`check_tokenizer`) before any weight is read."""
    _check_files(model_dir, "config.json")
    tokenizer = GPT1Tokenizer.load(model_dir / TOKENIZER)
    check_tokenizer(load_config(model_dir / "config.json"), tokenizer, model_dir)
    return tokenizer


@dataclass(frozen=True)
class LanguageModel:
    """A pretrained model folder, loaded: the trunk and the tokenizer it reads."""

    model: Trunk
    tokenizer: GPT1Tokenizer


def load_language_model(model_dir: Path, map_location: str | torch.device = "cpu"
                        ) -> LanguageModel:
    """A model folder's trunk (`load_model`) and tokenizer (`load_tokenizer`)."""
    tokenizer = load_tokenizer(model_dir)
    return LanguageModel(load_model(model_dir, map_location), tokenizer)
