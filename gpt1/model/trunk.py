"""What every trunk gives the rest of the library: pretraining (the LM loss), fine-tuning (hidden
states and the LM loss over task text), zero-shot scoring and generation (LM logits), and its
size and training FLOPs. A trunk is an `nn.Module` subclass of `Trunk` with a `TrunkConfig`;
`gpt1.model.registry` names the trunks that `config.json`'s `model_type` can select."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import MISSING, asdict, fields
from pathlib import Path
from typing import Any, ClassVar, Self, get_type_hints

import torch
import torch.nn.functional as F
from torch import nn

from gpt1.errors import InputError
from gpt1.model.lm_loss import linear_cross_entropy


class TrunkConfig(ABC):
    """A trunk's shape (a frozen dataclass subclassing this), saved as `config.json` with its
    `model_type`. Every trunk has the fields below: the heads read `n_embd` and
    `initializer_range`, training and generation `n_ctx`."""

    model_type: ClassVar[str]
    vocab_size: int
    n_ctx: int
    n_embd: int
    initializer_range: float

    @abstractmethod
    def parameter_count(self) -> int:
        """The trunk's parameters, known before it is built (memory checks use it)."""

    @abstractmethod
    def training_flops_per_token(self) -> float:
        """Forward + backward FLOPs per token of a training step (model FLOPs utilisation)."""

    def check(self) -> str | None:
        """What makes this config unbuildable beyond its fields' types, or None: here, a
        dropout probability (`*_pdrop`) of 1 or more."""
        for key, value in asdict(self).items():  # type: ignore[call-overload]
            if key.endswith("_pdrop") and value >= 1:
                return f"{key}={value!r}, expected a probability below 1"
        return None

    def save(self, path: Path) -> None:
        fields = asdict(self)  # type: ignore[call-overload]
        path.write_text(json.dumps({"model_type": self.model_type, **fields}, indent=2) + "\n")

    @classmethod
    def from_json(cls, data: dict[str, Any], path: Path | str,
                  defaults: bool = False) -> Self:
        """The config in `data` (a config.json without its `model_type`); ValueError names
        `path` and the key at fault. With `defaults`, a key left out takes its field's default
        (a config written elsewhere, which says less than ours)."""
        types = get_type_hints(cls)
        types = {key: kind for key, kind in types.items() if key != "model_type"}
        if defaults:
            data = {**{f.name: f.default for f in fields(cls)  # type: ignore[arg-type]
                       if f.default is not MISSING}, **data}
        if missing := sorted(types.keys() - data.keys()):
            raise InputError(f"{path}: missing keys {missing}")
        if unknown := sorted(data.keys() - types.keys()):
            raise InputError(f"{path}: unknown keys {unknown}")
        for key, kind in types.items():
            value, least = data[key], 1 if kind is int else 0
            allowed = (int,) if kind is int else (int, float)  # type(), as a bool is no number
            if type(value) not in allowed or value < least:
                raise InputError(f"{path}: {key}={value!r}, expected "
                                 f"{'an integer' if kind is int else 'a number'} >= {least}")
        config = cls(**{key: kind(data[key]) for key, kind in types.items()})
        if problem := config.check():
            raise InputError(f"{path}: {problem}")
        return config


class Trunk(nn.Module, ABC):
    """A language model's body: token ids (B, T) -> hidden states (B, T, n_embd), and an LM head
    reading next-token logits off them through `lm_head_weight` (V, n_embd)."""

    config_class: ClassVar[type[TrunkConfig]]

    def __init__(self, config: TrunkConfig) -> None:
        super().__init__()
        self.config = config

    @abstractmethod
    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Hidden states (B, T, n_embd) for token ids (B, T), T <= n_ctx."""

    @property
    @abstractmethod
    def lm_head_weight(self) -> torch.Tensor:
        """The LM head's (vocab_size, n_embd) matrix (GPT-1 ties it to the token embedding)."""

    def lm_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Next-token logits from hidden states."""
        return F.linear(hidden, self.lm_head_weight)

    def lm_head_loss(self, hidden: torch.Tensor, targets: torch.Tensor,
                     ignore_index: int = -100) -> torch.Tensor:
        """Mean cross-entropy of `targets` (...) under `lm_logits(hidden)` (..., n_embd), computed
        without the full logits (`gpt1.model.lm_loss`)."""
        return linear_cross_entropy(hidden, self.lm_head_weight, targets, ignore_index)

    def lm_loss(self, input_ids: torch.Tensor, targets: torch.Tensor,
                ignore_index: int = -100) -> torch.Tensor:
        """Mean cross-entropy of predicting `targets` (B, T) from `input_ids` (B, T)."""
        return self.lm_head_loss(self(input_ids), targets, ignore_index)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())
