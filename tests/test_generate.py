"""gpt1.model.generate and `gpt1 generate`: seeded sampling, greedy decoding, context cropping,
and the sample lm_eval writes from its prompt."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from gpt1.cli import app
from gpt1.config import SampleParams
from gpt1.corpus.bpe import GPT1Tokenizer, train_bpe
from gpt1.corpus.text import TextCleaner
from gpt1.errors import InputError
from gpt1.model.generate import sample, sample_text
from gpt1.model.registry import save_model
from gpt1.model.transformer import GPT1, GPT1Config
from tests.conftest import run

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def tiny_model(vocab: int = 20, n_ctx: int = 8) -> GPT1:
    torch.manual_seed(0)
    return GPT1(GPT1Config(vocab_size=vocab, n_ctx=n_ctx, n_embd=16, n_layer=2, n_head=2))


def greedy(model: GPT1, ids: list[int], steps: int) -> list[int]:
    ids = list(ids)
    with torch.no_grad():
        for _ in range(steps):
            window = torch.tensor([ids[-model.config.n_ctx:]])
            ids.append(int(model.lm_logits(model(window))[0, -1].argmax()))
    return ids


def test_same_seed_same_text_and_length() -> None:
    model = tiny_model()
    first = sample(model, [1, 2, 3], 12, temperature=1.0, top_k=None, seed=7)
    assert len(first) == 12 and all(0 <= i < 20 for i in first)
    assert sample(model, [1, 2, 3], 12, temperature=1.0, top_k=None, seed=7) == first
    others = {tuple(sample(model, [1, 2, 3], 12, temperature=1.0, seed=s)) for s in range(5)}
    assert len(others) > 1  # the seed matters


def test_temperature_zero_and_top1_are_greedy_even_past_n_ctx() -> None:
    model = tiny_model(n_ctx=8)
    prompt = [1, 2, 3, 4, 5, 6]  # 6 + 10 tokens: the window has to slide
    expected = greedy(model.eval(), prompt, 10)[len(prompt):]
    assert sample(model, prompt, 10, temperature=0.0) == expected
    assert sample(model, prompt, 10, temperature=1.0, top_k=1, seed=3) == expected


def test_bad_arguments() -> None:
    model = tiny_model()
    with pytest.raises(ValueError, match="empty"):
        sample(model, [], 5)
    with pytest.raises(ValueError, match="temperature"):
        sample(model, [1], 5, temperature=-1.0)


PROMPT_TEXT = "The rain fell steadily that evening, and the lamps along the quay were lit."


def _prompted(**settings: object) -> tuple[GPT1, GPT1Tokenizer, SampleParams]:
    tok = GPT1Tokenizer(train_bpe([TextCleaner()(PROMPT_TEXT)] * 20, 80, 2))
    cfg = SampleParams(**{"prompt": PROMPT_TEXT, "tokens": 6, "temperature": 1.0, "top_k": 5,
                          "seed": 3, **settings})
    return tiny_model(vocab=tok.vocab_size, n_ctx=8), tok, cfg


def test_sample_text_reads_the_prompt_as_the_corpus_and_records_its_settings() -> None:
    model, tok, cfg = _prompted()
    record = sample_text(model, tok, cfg)
    prompt_ids = tok.encode(TextCleaner()(PROMPT_TEXT))  # cleaned: spaCy's tokens, lower case
    assert record == {**cfg.model_dump(), "prompt_as_read": tok.decode(prompt_ids),
                      "continuation": tok.decode(sample(model, prompt_ids, 6, 1.0, 5, 3))}
    assert list(record) == ["prompt", "tokens", "temperature", "top_k", "seed",
                            "prompt_as_read", "continuation"]
    assert record["prompt_as_read"] != PROMPT_TEXT
    assert sample_text(model, tok, cfg) == record  # seeded


def test_a_prompt_with_no_token_names_the_key() -> None:
    model, tok, cfg = _prompted(prompt="   ")
    with pytest.raises(InputError, match=r"^lm_eval\.sample\.prompt: the prompt is empty after "
                                         r"tokenisation$"):
        sample_text(model, tok, cfg)


@pytest.fixture()
def model_dir(tmp_path: Path) -> Path:
    text = "the cat sat on the mat . the dog sat on the log . " * 20
    tokenizer = train_bpe([text], vocab_size=60, min_frequency=1)
    model = tiny_model(vocab=tokenizer.get_vocab_size(), n_ctx=16)
    save_model(model, tmp_path)
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    return tmp_path


def test_cli_generates_from_a_saved_model(model_dir: Path) -> None:
    args = ["generate", "--model", str(model_dir), "--prompt", "The cat", "--max-tokens", "5",
            "--temperature", "0"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert result.output.startswith("the cat")
    assert CliRunner().invoke(app, args).output == result.output  # greedy: reproducible

    missing = CliRunner().invoke(app, ["generate", "--model", str(model_dir / "nope"),
                                       "--prompt", "x"])
    assert missing.exit_code == 2 and "not found" in missing.output


def _cut_short(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:100])


def _lengthen(path: Path) -> None:
    path.write_text(path.read_text().replace('"n_ctx": 16', '"n_ctx": 17'))


BAD_MODEL_FILES: dict[str, tuple[str, Callable[[Path], None], str]] = {
    "config not JSON": ("config.json", lambda p: p.write_text('{"vocab_size": 60,'),
                        "config.json: not JSON ("),
    "config of other weights": ("config.json", _lengthen,
                                "model.safetensors: positions_embed.weight has shape (16, 16), "
                                "but config.json makes it (17, 16)"),
    "weights cut short": ("model.safetensors", _cut_short,
                          "model.safetensors: not a readable safetensors file ("),
}


@pytest.mark.parametrize("case", BAD_MODEL_FILES)
def test_cli_bad_model_file_is_one_line(model_dir: Path, case: str) -> None:
    name, corrupt, message = BAD_MODEL_FILES[case]
    corrupt(model_dir / name)
    before = {p.name: p.read_bytes() for p in model_dir.iterdir()}
    proc = run([sys.executable, "-m", "gpt1.cli", "generate", "--model", str(model_dir),
                "--prompt", "the cat"], model_dir, check=False)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"error: {model_dir}/{message}"), proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert {p.name: p.read_bytes() for p in model_dir.iterdir()} == before
