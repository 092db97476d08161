"""A fine-tuned model's folder that stands alone: everything needed to use it without params.yaml
or the checkout.

`artifacts/finetune/<task>/` holds
- `config.json` and `model.safetensors`: the trunk's shape, and the weights of the whole
  `TaskModel` (the trunk under `trunk.`, the linear head under `head.`);
- `tokenizer.json`: the BPE it was fine-tuned with, GPT-1's special tokens among it;
- `task.json` (`TaskCard`): the registry entry it was fine-tuned on (family, labels, the columns
  its files name, score range), and what the model's input is made of: the family's fields and
  input layout, the text cleaning, and the maximum length of a sequence.

`gpt1 predict` and `gpt1 export-hf` read nothing else.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from gpt1.config import FAMILY_MIN_CTX, TaskParams
from gpt1.corpus.tokenizer import GPT1Tokenizer
from gpt1.downstream.families import TaskFamily, family_of
from gpt1.errors import InputError, not_found
from gpt1.model.heads import TaskModel
from gpt1.model.registry import (
    TOKENIZER,
    build_trunk,
    check_tokenizer,
    load_config,
    load_safetensors,
    save_safetensors,
)

CARD = "task.json"
FILES = ("config.json", "model.safetensors", TOKENIZER, CARD)
CARD_FORMAT = 1
# what `gpt1.corpus.text.TextCleaner` does to every text before BPE, as the card records it
CLEANING = "ftfy.fix_text, then the paper's text_standardize, then spaCy blank('en') tokens " \
           "joined by single spaces"


class TaskCard(BaseModel):
    """`task.json`: what a fine-tuned model is for, and how its input is made."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal[1]
    task: str  # the registry name it was fine-tuned as
    spec: TaskParams  # the registry entry, whole
    fields: list[str]  # the family's texts, in the order its layout names them
    layouts: list[str]  # each sequence an example becomes (`TaskFamily.layouts`)
    cleaning: dict[str, str]  # the steps, and the versions of ftfy and spaCy
    n_ctx: int  # the longest sequence, in tokens, special tokens included
    seed: int  # of the fine-tuning run kept (the median of finetune.seeds)

    @property
    def family(self) -> TaskFamily:
        return family_of(self.spec)


def task_card(name: str, spec: TaskParams, n_ctx: int, seed: int) -> TaskCard:
    """The card of a model of registry task `name` fine-tuned now."""
    family = family_of(spec)
    return TaskCard(format=CARD_FORMAT, task=name, spec=spec,
                    fields=[column.name for column in family.columns],
                    layouts=list(family.layouts),
                    cleaning={"steps": CLEANING, "ftfy": version("ftfy"),
                              "spacy": version("spacy")},
                    n_ctx=n_ctx, seed=seed)


def save_finetuned(out_dir: Path, model: TaskModel, card: TaskCard, tokenizer: Path) -> None:
    """Write the model folder into `out_dir` (an empty folder, e.g. `atomic_dir`'s)."""
    save_safetensors(model.state_dict(), out_dir / "model.safetensors")
    model.trunk.config.save(out_dir / "config.json")
    shutil.copyfile(tokenizer, out_dir / TOKENIZER)
    (out_dir / CARD).write_text(card.model_dump_json(indent=2) + "\n", encoding="utf-8")


def read_card(model_dir: Path) -> TaskCard:
    """The card of a fine-tuned model folder; one line naming the file where it is missing, is
    not a card, or describes another layout than the family's today."""
    path = model_dir / CARD
    if not path.is_file():
        raise not_found(path, f": {model_dir} is not a fine-tuned model folder "
                              "(artifacts/finetune/<task>, written by finetune@<task>)")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise InputError(f"{path}: not JSON ({err})") from None
    if not isinstance(raw, dict) or raw.get("format") != CARD_FORMAT:
        raise InputError(f"{path}: not a task card of format {CARD_FORMAT} (a model fine-tuned "
                         "by an older gpt1: run its finetune stage again)")
    try:
        card = TaskCard.model_validate(raw)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(map(str, first["loc"]))
        raise InputError(f"{path}: {where}: {first['msg']}") from None
    if card.layouts != list(card.family.layouts):
        raise InputError(f"{path}: the model reads {card.layouts}, the {card.spec.family} family "
                         f"now lays examples out as {list(card.family.layouts)}: fine-tune again")
    return card


@dataclass(frozen=True)
class Finetuned:
    """A fine-tuned model folder, loaded: the model (on the CPU), its tokenizer and card."""

    model: TaskModel
    tokenizer: GPT1Tokenizer
    card: TaskCard


def load_finetuned(model_dir: Path) -> Finetuned:
    """Load a folder `save_finetuned` wrote; loading executes no code (JSON and safetensors)."""
    for name in FILES:
        if not (model_dir / name).is_file():
            raise not_found(model_dir / name, f": {model_dir} is not a fine-tuned model folder "
                                              "(artifacts/finetune/<task>)")
    card = read_card(model_dir)
    tokenizer = GPT1Tokenizer.load(model_dir / TOKENIZER)
    config = load_config(model_dir / "config.json")
    check_tokenizer(config, tokenizer, model_dir)
    if not FAMILY_MIN_CTX[card.spec.family] <= card.n_ctx <= config.n_ctx:
        raise InputError(f"{model_dir / CARD}: n_ctx {card.n_ctx}, expected between "
                         f"{FAMILY_MIN_CTX[card.spec.family]} (the shortest {card.spec.family} "
                         f"example) and the model's {config.n_ctx} positions "
                         f"({model_dir / 'config.json'})")
    state = load_safetensors(model_dir / "model.safetensors")
    outputs = card.family.n_outputs(card.spec)
    model = TaskModel(build_trunk(config), family_of(card.spec), outputs, dropout=0.0, seed=0)
    try:
        model.load_state_dict(state)
    except RuntimeError as err:
        first = str(err).strip().splitlines()[-1].strip()
        raise InputError(f"{model_dir / 'model.safetensors'}: not the model config.json and "
                         f"task.json describe ({first})") from None
    return Finetuned(model.eval(), tokenizer, card)
