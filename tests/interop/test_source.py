"""gpt1.interop.source: a released GPT-1 (OpenAI's files, or a HuggingFace openai-gpt directory)
as the pipeline's pretrained model, with the real 40,478-token vocabulary of
`../shared/data/openai-gpt1` and small random weights."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import OpenAIGPTLMHeadModel

from gpt1.config import ModelParams
from gpt1.corpus.tokenizer import GPT1Tokenizer
from gpt1.interop.openai_text import load_release_tokenizer
from gpt1.interop.source import import_pretrained
from tests.releases import write_hf_directory, write_openai_release

pytestmark = pytest.mark.usefixtures("one_torch_thread")

N_VOCAB = 40_478
POSITIONS, D, LAYERS, HEADS = 40, 16, 2, 2
MODEL = ModelParams(n_ctx=24, n_embd=D, n_layer=LAYERS, n_head=HEADS, dropout=0.1)


@pytest.fixture(scope="module")
def vocab_dir(shared_data: Path) -> Path:
    return shared_data / "openai-gpt1"


@pytest.fixture(scope="module")
def openai_release(vocab_dir: Path, tmp_path_factory: pytest.TempPathFactory
                   ) -> tuple[Path, list[np.ndarray]]:
    folder = tmp_path_factory.mktemp("openai") / "model"
    return folder, write_openai_release(folder, vocab_dir, POSITIONS, D, LAYERS)


@pytest.fixture(scope="module")
def hf_dir(vocab_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("hf") / "openai-gpt"
    write_hf_directory(folder, vocab_dir, POSITIONS, D, LAYERS, HEADS)
    return folder


def special_rows_as_the_original(seed: int) -> np.ndarray:
    """train.py: `(np.random.randn(n_special, n_embd) * 0.02)` rows after the release's, here
    from a seeded generator, one row per special token (<start> <delim> <classify> <pad>)."""
    return np.random.default_rng(seed).normal(0.0, 0.02, (4, D)).astype(np.float32)


def test_openai_release(openai_release: tuple[Path, list[np.ndarray]], vocab_dir: Path) -> None:
    folder, arrays = openai_release
    got = import_pretrained("openai", folder, MODEL, seed=5)
    cfg = got.model.config
    assert (cfg.vocab_size, cfg.n_ctx, cfg.n_embd, cfg.n_layer, cfg.n_head) == (
        N_VOCAB + 4, MODEL.n_ctx, D, LAYERS, HEADS)
    assert cfg.embd_pdrop == cfg.attn_pdrop == cfg.resid_pdrop == MODEL.dropout
    state = got.model.state_dict()
    assert torch.equal(state["positions_embed.weight"], torch.from_numpy(arrays[0][:MODEL.n_ctx]))
    assert torch.equal(state["tokens_embed.weight"][:N_VOCAB], torch.from_numpy(arrays[1]))
    assert torch.equal(state["tokens_embed.weight"][N_VOCAB:],
                       torch.from_numpy(special_rows_as_the_original(5)))
    # the conv kernels of layer 1's MLP projection, [1, in, out], are our (out, in)
    assert torch.equal(state["h.1.mlp.c_proj.weight"], torch.from_numpy(arrays[2 + 12 + 8][0].T))

    tok = GPT1Tokenizer(got.tokenizer)
    release = load_release_tokenizer(vocab_dir).tokenizer
    assert got.tokenizer.get_vocab() == release.backend.get_vocab()
    assert (tok.start_id, tok.delim_id, tok.classify_id, tok.pad_id) == (40478, 40479, 40480,
                                                                         40481)
    text = "the film was n't great , was it ?"
    assert tok.encode(text) == release.encode(text)


def test_hf_directory(hf_dir: Path, vocab_dir: Path, tmp_path: Path) -> None:
    got = import_pretrained("hf", hf_dir, MODEL, seed=5)
    assert got.model.config.vocab_size == N_VOCAB + 4 and got.model.config.n_ctx == MODEL.n_ctx
    assert torch.equal(got.model.tokens_embed.weight[N_VOCAB:].detach(),
                       torch.from_numpy(special_rows_as_the_original(5)))
    hf = OpenAIGPTLMHeadModel.from_pretrained(hf_dir).eval()
    ours = got.model.eval()
    x = torch.randint(0, N_VOCAB, (2, MODEL.n_ctx), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        theirs = hf(input_ids=x).logits
        mine = ours.lm_logits(ours(x))[..., :N_VOCAB]
    assert (mine - theirs).abs().max().item() <= 1e-5
    assert theirs.abs().max() > 0.01  # not trivially equal

    # the BPE from transformers' tokenizer.json, and from the hub's vocab.json and merges.txt
    release = load_release_tokenizer(vocab_dir).tokenizer.backend
    assert (hf_dir / "tokenizer.json").is_file() and not (hf_dir / "vocab.json").exists()
    hub = Path(shutil.copytree(hf_dir, tmp_path / "hub"))
    (hub / "tokenizer.json").unlink()
    shutil.copyfile(vocab_dir / "encoder_bpe_40000.json", hub / "vocab.json")
    shutil.copyfile(vocab_dir / "vocab_40000.bpe", hub / "merges.txt")
    text = "the film was n't great , was it ?"
    for tokenizer in (got.tokenizer, import_pretrained("hf", hub, MODEL, seed=5).tokenizer):
        assert tokenizer.get_vocab() == release.get_vocab()
        assert tokenizer.encode(text).ids == release.encode(text).ids


def _fails(source: str, folder: Path, match: str, model: ModelParams = MODEL) -> None:
    with pytest.raises((ValueError, FileNotFoundError), match=match):
        import_pretrained(source, folder, model, seed=0)


def test_a_release_of_another_size_names_the_keys(
        openai_release: tuple[Path, list[np.ndarray]], hf_dir: Path) -> None:
    paper = ModelParams(n_ctx=512, n_embd=768, n_layer=12, n_head=12, dropout=0.1)
    for source, folder, what in (("openai", openai_release[0], "params_shapes.json"),
                                 ("hf", hf_dir, "config.json")):
        _fails(source, folder, model=paper, match=(
            rf"{what}: this model does not fit params.yaml's model section \(it has 40 "
            r"positions, fewer than model.n_ctx \(512\): set model.n_ctx to at most 40; its "
            r"n_embd is 16, model.n_embd is 768: set model.n_embd=16; its n_layer is 2, "
            r"model.n_layer is 12: set model.n_layer=2"))
    _fails("hf", hf_dir, match="its n_head is 2, model.n_head is 4: set model.n_head=2",
           model=MODEL.model_copy(update={"n_head": 4}))


def test_malformed_release_shapes(openai_release: tuple[Path, list[np.ndarray]],
                                  tmp_path: Path) -> None:
    folder = Path(shutil.copytree(openai_release[0], tmp_path / "model"))
    shapes = json.loads((folder / "params_shapes.json").read_text())
    shapes[14] = [1, D, 3 * D + 1]
    (folder / "params_shapes.json").write_text(json.dumps(shapes))
    _fails("openai", folder, match=r"array 14 \(layer 1 attn.c_attn.weight\) has shape "
                                   r"\[1, 16, 49\], expected \[1, 16, 48\]")
    (folder / "params_shapes.json").write_text(json.dumps(shapes[:-1]))
    _fails("openai", folder, match="12 arrays per layer, got 25 arrays")


def test_a_release_whose_encoder_does_not_fit_its_token_rows(
        openai_release: tuple[Path, list[np.ndarray]], tmp_path: Path) -> None:
    folder = Path(shutil.copytree(openai_release[0], tmp_path / "model"))
    shapes = json.loads((folder / "params_shapes.json").read_text())
    shapes[1] = [N_VOCAB - 1, D]
    (folder / "params_shapes.json").write_text(json.dumps(shapes))
    _fails("openai", folder, match=r"encoder_bpe_40000.json: 40478 tokens, but "
                                   r"params_shapes.json has 40477 token rows")


def test_an_hf_directory_of_another_architecture(hf_dir: Path, tmp_path: Path) -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    gpt2 = tmp_path / "gpt2"
    GPT2LMHeadModel(GPT2Config(vocab_size=100, n_positions=32, n_embd=16, n_layer=2,
                               n_head=2)).save_pretrained(gpt2)
    _fails("hf", gpt2, match=r"config.json: model_type 'gpt2', expected 'openai-gpt'")

    no_tokenizer = Path(shutil.copytree(hf_dir, tmp_path / "no_tokenizer"))
    (no_tokenizer / "tokenizer.json").unlink()
    _fails("hf", no_tokenizer, match=r"no_tokenizer: no tokenizer: expected vocab.json and "
                                     r"merges.txt, or tokenizer.json")
    shutil.copyfile(hf_dir / "tokenizer.json", no_tokenizer / "merges.txt")
    _fails("hf", no_tokenizer, match=r"no_tokenizer/vocab.json: not found")

    _fails("openai", tmp_path / "nowhere", match=r"nowhere: not found \(pretrain.source_dir\)")
