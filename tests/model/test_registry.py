"""gpt1.model.registry: a model folder is one thing. Its tokenizer must have one token per row of
the token table its config.json gives the model: a tokenizer with more tokens gives ids past the
table (an IndexError), one with fewer leaves rows no text reaches (silently another model). Each
mismatch is one line naming both files and both numbers, from every command that loads a
pretrained folder (`gpt1 generate`, `gpt1 export-hf`), before any weight is read."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer
from typer.testing import CliRunner

from gpt1.cli import app
from gpt1.corpus.tokenizer import train_bpe
from gpt1.errors import InputError
from gpt1.model.registry import load_language_model, load_tokenizer, save_model
from gpt1.model.transformer import GPT1, GPT1Config

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TEXTS = ["the keeper climbed the stair and the lantern burned low ."] * 8


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    return train_bpe(TEXTS, vocab_size=60, min_frequency=1)


def folder_with_rows(path: Path, tokenizer: Tokenizer, rows: int) -> Path:
    """A pretrained model folder whose token table has `rows` rows, beside `tokenizer`."""
    path.mkdir()
    torch.manual_seed(0)
    save_model(GPT1(GPT1Config(vocab_size=rows, n_ctx=16, n_embd=16, n_layer=1, n_head=2)), path)
    tokenizer.save(str(path / "tokenizer.json"))
    return path


def test_a_folder_whose_tokenizer_fits_loads(tokenizer: Tokenizer, tmp_path: Path) -> None:
    tokens = tokenizer.get_vocab_size(with_added_tokens=True)
    lm = load_language_model(folder_with_rows(tmp_path / "m", tokenizer, tokens))
    assert lm.model.config.vocab_size == lm.tokenizer.vocab_size == tokens


@pytest.mark.parametrize("extra_rows", [5, -5])
def test_a_tokenizer_of_another_size_is_one_line_naming_both(tokenizer: Tokenizer,
                                                             tmp_path: Path,
                                                             extra_rows: int) -> None:
    tokens = tokenizer.get_vocab_size(with_added_tokens=True)
    folder = folder_with_rows(tmp_path / "m", tokenizer, tokens + extra_rows)
    expected = (f"{folder / 'tokenizer.json'}: {tokens} tokens, but {folder / 'config.json'} "
                f"gives the model {tokens + extra_rows} token rows (vocab_size)")
    for load in (load_language_model, load_tokenizer):
        with pytest.raises(InputError, match=expected.replace("(", r"\(").replace(")", r"\)")):
            load(folder)
    for command in (["generate", "--model", str(folder), "--prompt", "the keeper"],
                    ["export-hf", "--model", str(folder), "--out", str(tmp_path / "hf")]):
        result = CliRunner().invoke(app, command)
        assert result.exit_code == 2, result.output
        assert result.output.startswith(f"error: {expected}"), result.output
        assert result.output.count("\n") == 1
    assert not (tmp_path / "hf").exists()
