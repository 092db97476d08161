"""Typed view of `params.yaml`: loaded and validated once, with errors that name the key."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

DEFAULT_PARAMS = Path("params.yaml")
_SUBKEY = re.compile(r"^[\w.]+: ")


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class IngestParams(Section):
    root: str
    corpus: list[str] = Field(min_length=1)
    doc_chars: int = Field(gt=0)
    max_train_examples: int | None = Field(default=None, gt=0)
    max_dev_examples: int | None = Field(default=None, gt=0)


class CleanParams(Section):
    workers: int = Field(ge=0)
    batch_docs: int = Field(gt=0)
    min_chars: int = Field(ge=0)
    dedupe: bool


class BpeParams(Section):
    vocab_size: int = Field(ge=300, le=4_294_967_295)
    min_frequency: int = Field(ge=1)


class TokenizeParams(Section):
    val_every: int = Field(ge=2)
    shard_tokens: int = Field(gt=0)


class ModelParams(Section):
    n_ctx: int = Field(gt=0)
    n_embd: int = Field(gt=0)
    n_layer: int = Field(gt=0)
    n_head: int = Field(gt=0)
    dropout: float = Field(ge=0.0, lt=1.0)

    @model_validator(mode="after")
    def _heads_divide_width(self) -> ModelParams:
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd ({self.n_embd}) must be divisible by n_head ({self.n_head})")
        return self


Device = str
Precision = Literal["auto", "fp32", "bf16"]


class TrainingParams(Section):
    """Knobs every training loop has."""

    seed: int
    device: Device
    precision: Precision
    lr: float = Field(gt=0)
    batch_size: int = Field(gt=0)
    weight_decay: float = Field(ge=0)
    grad_clip: float = Field(gt=0)


class PretrainParams(TrainingParams):
    max_steps: int = Field(gt=0)
    warmup_steps: int = Field(ge=0)
    schedule: Literal["cosine", "linear"]
    eval_every: int = Field(gt=0)
    eval_batches: int = Field(gt=0)
    log_every: int = Field(gt=0)
    checkpoint_every: int = Field(gt=0)
    keep_checkpoints: int = Field(ge=1)
    peak_tflops: float | None = Field(gt=0)


class FinetuneTrainParams(TrainingParams):
    epochs: int = Field(gt=0)
    warmup_fraction: float = Field(ge=0, lt=1)
    lm_coef: float = Field(ge=0)
    clf_dropout: float = Field(ge=0, lt=1)


class FinetuneParams(Section):
    tasks: list[str] = Field(min_length=1)
    train: FinetuneTrainParams
    overrides: dict[str, dict[str, object]]

    @model_validator(mode="after")
    def _overrides_cover_tasks(self) -> FinetuneParams:
        if len(set(self.tasks)) != len(self.tasks):
            raise ValueError(f"tasks lists a task twice: {self.tasks}")
        for name in self.tasks:
            if name not in self.overrides:
                raise ValueError(f"overrides.{name} is missing (use `{name}: {{}}` for none)")
        for name, override in self.overrides.items():
            unknown = set(override) - set(FinetuneTrainParams.model_fields)
            if unknown:
                raise ValueError(f"overrides.{name}: unknown keys {sorted(unknown)}")
            try:
                self.for_task(name)
            except ValidationError as err:
                bad = "; ".join(f"overrides.{name}.{'.'.join(map(str, e['loc']))}: {e['msg']}"
                                f" (got {e['input']!r})" for e in err.errors())
                raise ValueError(bad) from None
        return self

    def for_task(self, name: str) -> FinetuneTrainParams:
        """The shared training knobs with `name`'s overrides applied (and validated)."""
        return FinetuneTrainParams(**{**self.train.model_dump(), **self.overrides.get(name, {})})


class Params(Section):
    ingest: IngestParams
    clean: CleanParams
    bpe: BpeParams
    tokenize: TokenizeParams
    model: ModelParams
    pretrain: PretrainParams
    finetune: FinetuneParams


class ParamsError(ValueError):
    """`params.yaml` is missing, unparsable or invalid; the message names the file and key."""


def _format_errors(path: Path, err: ValidationError) -> str:
    lines = [f"{path}: {err.error_count()} invalid value(s)"]
    for e in err.errors():
        key = ".".join(str(part) for part in e["loc"]) or "<root>"
        if e["type"] == "value_error":  # our validators: the message may start with a sub-key
            msg = e["msg"].removeprefix("Value error, ")
            lines.append(f"  {key}.{msg}" if _SUBKEY.match(msg) else f"  {key}: {msg}")
        else:
            got = "" if e["type"] == "missing" else f" (got {e['input']!r})"
            lines.append(f"  {key}: {e['msg']}{got}")
    return "\n".join(lines)


def parse_params(raw: object, path: Path = DEFAULT_PARAMS) -> Params:
    """Validate an already-parsed params mapping; `path` only labels the errors."""
    try:
        return Params.model_validate(raw)
    except ValidationError as err:
        raise ParamsError(_format_errors(path, err)) from None


def load_params(path: Path | str = DEFAULT_PARAMS) -> Params:
    """Read and validate `params.yaml`."""
    path = Path(path)
    if not path.is_file():
        raise ParamsError(f"{path}: not found (run from the repository root or pass --params)")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise ParamsError(f"{path}: not valid YAML: {err}") from None
    return parse_params(raw, path)
