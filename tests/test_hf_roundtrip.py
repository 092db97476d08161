"""A folder our own `gpt1 export-hf` wrote is a `pretrain.source: hf` the pipeline accepts: its
tokenizer.json lists GPT-1's special tokens after the BPE's, and its model has their rows, which
the import keeps (a released openai-gpt directory has neither: rows are drawn for them). Through
`gpt1 set` and the pretrain stage, the pretrained model is the exported one, weight for weight."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
import torch

from gpt1.config import ModelParams, load_params
from gpt1.corpus.bpe import SPECIAL_TOKENS, GPT1Tokenizer, train_bpe
from gpt1.interop.hf import export_hf
from gpt1.interop.source import import_pretrained
from gpt1.model.registry import load_model, save_model
from gpt1.model.transformer import GPT1, GPT1Config
from tests.conftest import REPO, run

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# the tiny preset's model section
TINY = ModelParams(n_ctx=32, n_embd=32, n_layer=2, n_head=2, dropout=0.1)
TEXTS = ["the lantern at greywater burned low , and the keeper climbed the stair .",
         "a quick brown fox jumps over the lazy dog near the water 's edge ."] * 8
TEXT = "the keeper saw the fox at the water ."


@pytest.fixture()
def ours(tmp_path: Path) -> Path:
    """A model pretrained here (the tiny preset's shape, weights far from a fresh init, special
    rows included) with its tokenizer."""
    tokenizer = train_bpe(TEXTS, 80, 1)
    torch.manual_seed(3)
    model = GPT1(GPT1Config(vocab_size=tokenizer.get_vocab_size(with_added_tokens=True),
                            n_ctx=TINY.n_ctx, n_embd=TINY.n_embd, n_layer=TINY.n_layer,
                            n_head=TINY.n_head))
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn_like(param))
    folder = tmp_path / "ours"
    folder.mkdir()
    save_model(model, folder)
    tokenizer.save(str(folder / "tokenizer.json"))
    return folder


def _same_weights(a: GPT1, b: GPT1) -> None:
    before, after = a.state_dict(), b.state_dict()
    assert set(before) == set(after)
    for key, tensor in before.items():
        assert torch.equal(tensor, after[key]), key


def _logits(model: GPT1, ids: list[int]) -> torch.Tensor:
    model.eval()
    with torch.no_grad():
        x = torch.tensor([ids])
        return model.lm_logits(model(x))


def test_our_export_imports_as_it_was(ours: Path, tmp_path: Path) -> None:
    original = load_model(ours)
    tokenizer = GPT1Tokenizer.load(ours / "tokenizer.json")
    hf = export_hf(ours, tmp_path / "hf")
    got = import_pretrained("hf", hf, TINY, seed=5)
    assert got.model.config.vocab_size == original.config.vocab_size  # no rows added
    _same_weights(original, got.model)
    imported = GPT1Tokenizer(got.tokenizer)
    assert imported.vocab_size == tokenizer.vocab_size
    assert [imported.start_id, imported.delim_id, imported.classify_id, imported.pad_id] == \
        [tokenizer.start_id, tokenizer.delim_id, tokenizer.classify_id, tokenizer.pad_id]
    ids = imported.encode(TEXT)
    assert ids == tokenizer.encode(TEXT) and tokenizer.unk_id not in ids
    ids = [tokenizer.start_id, *ids, tokenizer.classify_id]
    assert torch.equal(_logits(original, ids), _logits(got.model, ids))

    # fewer positions than it has: cut, the rest as it was
    short = import_pretrained("hf", hf, TINY.model_copy(update={"n_ctx": 16}), seed=5).model
    assert torch.equal(short.positions_embed.weight, original.positions_embed.weight[:16])
    assert torch.equal(short.tokens_embed.weight, original.tokens_embed.weight)


def test_special_tokens_elsewhere_are_not_taken_for_ours(ours: Path, tmp_path: Path) -> None:
    """Token rows for the special tokens are kept only where tokenizer.json puts them, in
    GPT-1's order, right after the BPE's tokens; otherwise the count is refused as before."""
    hf = export_hf(ours, tmp_path / "hf")
    path = hf / "tokenizer.json"
    spec = json.loads(path.read_text())
    added = [entry for entry in spec["added_tokens"] if entry["content"] in SPECIAL_TOKENS]
    added[0]["content"], added[1]["content"] = added[1]["content"], added[0]["content"]
    path.write_text(json.dumps(spec))
    n_tokens = added[0]["id"]
    with pytest.raises(ValueError, match=rf"{path}: {n_tokens} tokens, but config.json "
                                         rf"\(vocab_size\) has {n_tokens + 4} token rows"):
        import_pretrained("hf", hf, TINY, seed=5)


def test_the_pipeline_pretrains_nothing_and_takes_our_export(ours: Path, tmp_path: Path) -> None:
    """`gpt1 export-hf`, `gpt1 set pretrain.source=hf pretrain.source_dir=...` and the pretrain
    stage, as a user runs them: artifacts/pretrain is the exported model, weight for weight, its
    tokenizer giving the same ids."""
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    shutil.copyfile(REPO / "params.yaml", checkout / "params.yaml")
    gpt1 = [sys.executable, "-m", "gpt1.cli"]
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(REPO),
                                                      os.environ.get("PYTHONPATH")]))}
    run([*gpt1, "preset", "tiny"], checkout)
    run([*gpt1, "export-hf", "--model", str(ours), "--out", str(tmp_path / "hf")], checkout)
    run([*gpt1, "set", "pretrain.source=hf", f"pretrain.source_dir={tmp_path / 'hf'}"],
        checkout)
    assert load_params(checkout / "params.yaml").pretrain.source == "hf"
    run([sys.executable, "-m", "tasks.pretrain"], checkout, env=env)

    pretrained = checkout / "artifacts" / "pretrain"
    _same_weights(load_model(ours), load_model(pretrained))
    tokenizer = GPT1Tokenizer.load(pretrained / "tokenizer.json")
    assert tokenizer.encode(TEXT) == GPT1Tokenizer.load(ours / "tokenizer.json").encode(TEXT)
    metrics = json.loads((checkout / "metrics" / "pretrain.json").read_text())
    assert (metrics["source"], metrics["vocab_size"]) == ("hf", tokenizer.vocab_size)
