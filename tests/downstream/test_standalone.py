"""gpt1.downstream.standalone: a fine-tuned model folder is checked as one thing before its weights
are read. Its tokenizer has one token per row of the model's token table; its card's n_ctx (the
longest sequence fed to the model) is no more than the model's positions (more gives position
ids past the table: an IndexError on a long input) and leaves room for the family's special
tokens and a token of each text (fewer would feed the model nothing). `gpt1 predict` and
`gpt1 export-hf` say so in one line naming the file and the numbers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer
from typer.testing import CliRunner

from gpt1.cli import app
from gpt1.config import TaskParams
from gpt1.corpus.tokenizer import train_bpe
from gpt1.downstream.families import family_of
from gpt1.downstream.standalone import load_finetuned, save_finetuned, task_card
from gpt1.model.heads import TaskModel
from gpt1.model.transformer import GPT1, GPT1Config

pytestmark = pytest.mark.usefixtures("one_torch_thread")

POSITIONS = 16
TASK = TaskParams(title="Mine", family="entailment", reader="glue_rte", labels=["yes", "no"],
                  metrics=["accuracy"], files={"train": "rte/train.tsv", "dev": "rte/dev.tsv"})


@pytest.fixture(scope="module")
def tokenizer_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    train_bpe(["the keeper climbed the stair ."] * 8, vocab_size=50, min_frequency=1).save(
        str(path))
    return path


def finetuned(folder: Path, tokenizer_file: Path, rows_more: int = 0,
              card_n_ctx: int = POSITIONS) -> Path:
    """A fine-tuned entailment folder: a tiny trunk of `POSITIONS` positions and a token row per
    token of the tokenizer (and `rows_more`), its card saying `card_n_ctx`."""
    tokens = Tokenizer.from_file(str(tokenizer_file)).get_vocab_size(with_added_tokens=True)
    torch.manual_seed(0)
    trunk = GPT1(GPT1Config(vocab_size=tokens + rows_more, n_ctx=POSITIONS, n_embd=16,
                            n_layer=1, n_head=2))
    model = TaskModel(trunk, family_of(TASK), family_of(TASK).n_outputs(TASK), 0.0, 0)
    folder.mkdir()
    save_finetuned(folder, model, task_card("mine", TASK, card_n_ctx, 0), tokenizer_file)
    return folder


def refused(folder: Path, tmp_path: Path, expected: str) -> None:
    """Loading the folder, scoring with it and exporting it each fail with `expected`."""
    with pytest.raises(ValueError) as err:
        load_finetuned(folder)
    assert str(err.value) == expected
    source = tmp_path / "in.tsv"
    source.write_text("premise\thypothesis\nthe keeper climbed\tthe stair\n")
    for command in (["predict", "--model", str(folder), "--input", str(source), "--out",
                     str(tmp_path / "out.csv")],
                    ["export-hf", "--model", str(folder), "--out", str(tmp_path / "hf")]):
        result = CliRunner().invoke(app, command)
        assert (result.exit_code, result.output) == (2, f"error: {expected}\n"), command
    assert not (tmp_path / "out.csv").exists() and not (tmp_path / "hf").exists()


def test_a_consistent_folder_loads(tokenizer_file: Path, tmp_path: Path) -> None:
    loaded = load_finetuned(finetuned(tmp_path / "m", tokenizer_file))
    assert loaded.model.trunk.config.vocab_size == loaded.tokenizer.vocab_size
    assert loaded.card.n_ctx == POSITIONS


@pytest.mark.parametrize("rows_more", [3, -3])
def test_a_tokenizer_of_another_size(tokenizer_file: Path, tmp_path: Path,
                                     rows_more: int) -> None:
    folder = finetuned(tmp_path / "m", tokenizer_file, rows_more=rows_more)
    tokens = Tokenizer.from_file(str(tokenizer_file)).get_vocab_size(with_added_tokens=True)
    refused(folder, tmp_path, f"{folder / 'tokenizer.json'}: {tokens} tokens, but "
                              f"{folder / 'config.json'} gives the model {tokens + rows_more} "
                              "token rows (vocab_size): the two are not one model's")


@pytest.mark.parametrize("card_n_ctx", [POSITIONS + 1, 4, 1])
def test_a_card_n_ctx_the_model_cannot_hold(tokenizer_file: Path, tmp_path: Path,
                                            card_n_ctx: int) -> None:
    """An entailment example is at least `<start> premise <delim> hypothesis <classify>`: 5."""
    folder = finetuned(tmp_path / "m", tokenizer_file)
    card = json.loads((folder / "task.json").read_text())
    (folder / "task.json").write_text(json.dumps({**card, "n_ctx": card_n_ctx}))
    refused(folder, tmp_path, f"{folder / 'task.json'}: n_ctx {card_n_ctx}, expected between 5 "
                              f"(the shortest entailment example) and the model's {POSITIONS} "
                              f"positions ({folder / 'config.json'})")
