"""gpt1.model.transformer: GPT-1's post-LN decoder with a tied LM head and HuggingFace parameter
names.

Our GPT1 matches HuggingFace's OpenAIGPTModel given the same weights (Conv1D = Linear.T)."""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path

import pytest
import torch
from transformers import OpenAIGPTConfig, OpenAIGPTModel

from gpt1.model.registry import load_config, load_model, save_model, save_safetensors
from gpt1.model.transformer import GPT1, GPT1Config

V, CTX, EMBD, LAYERS, HEADS = 50, 16, 32, 2, 4


def tiny_config(**changes: float) -> GPT1Config:
    cfg = dict(vocab_size=V, n_ctx=CTX, n_embd=EMBD, n_layer=LAYERS, n_head=HEADS)
    return GPT1Config(**{**cfg, **changes})


@pytest.fixture()
def model() -> GPT1:
    torch.manual_seed(0)
    return GPT1(tiny_config()).eval()


def ids(batch: int = 3, length: int = CTX, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, V, (batch, length), generator=g)


def test_shapes(model: GPT1) -> None:
    x = ids(3, 10)
    hidden = model(x)
    assert hidden.shape == (3, 10, EMBD)
    assert model.lm_logits(hidden).shape == (3, 10, V)
    assert model(ids(2, CTX)).shape == (2, CTX, EMBD)
    loss = model.lm_loss(x, x)
    assert loss.shape == () and torch.isfinite(loss)


def test_too_long_input_is_rejected(model: GPT1) -> None:
    with pytest.raises(ValueError, match="exceeds n_ctx 16"):
        model(ids(1, CTX + 1))


def test_causality(model: GPT1) -> None:
    x = ids(2, CTX)
    base = model(x)
    for t in (0, 5, CTX - 2):
        y = x.clone()
        y[:, t + 1:] = (y[:, t + 1:] + 7) % V  # change every later token
        changed = model(y)
        torch.testing.assert_close(changed[:, : t + 1], base[:, : t + 1], rtol=0, atol=1e-6)
        assert (changed[:, t + 1:] - base[:, t + 1:]).abs().max() > 1e-3


def test_positions_matter(model: GPT1) -> None:
    x = torch.full((1, 4), 3)
    h = model(x)
    assert (h[0, 1] - h[0, 2]).abs().max() > 1e-3  # same token, different position


def test_eval_is_deterministic_and_train_uses_dropout() -> None:
    torch.manual_seed(0)
    m = GPT1(tiny_config(embd_pdrop=0.5, attn_pdrop=0.5, resid_pdrop=0.5))
    x = ids(2, 8)
    m.eval()
    torch.testing.assert_close(m(x), m(x), rtol=0, atol=0)
    m.train()
    assert (m(x) - m(x)).abs().max() > 1e-3


def test_lm_head_is_tied_to_the_token_embedding(model: GPT1) -> None:
    hidden = model(ids(1, 6))
    torch.testing.assert_close(model.lm_logits(hidden), hidden @ model.tokens_embed.weight.T)
    # no separate head parameter exists: every parameter is stored once, none is vocab-by-width
    # except the embedding itself
    params = dict(model.named_parameters())
    assert [n for n, p in params.items() if p.shape == (V, EMBD)] == ["tokens_embed.weight"]
    assert not any("lm_head" in n for n in model.state_dict())
    # a change to the embedding is a change to the head
    with torch.no_grad():
        model.tokens_embed.weight[7].zero_()
    assert model.lm_logits(hidden)[..., 7].abs().max() == 0
    # and the head's gradient lands on the embedding
    model.zero_grad()
    model.lm_logits(hidden.detach()).sum().backward()
    assert model.tokens_embed.weight.grad is not None
    assert model.tokens_embed.weight.grad.abs().sum() > 0


def test_parameter_names_follow_huggingface(model: GPT1) -> None:
    names = set(model.state_dict())
    expected = {"tokens_embed.weight", "positions_embed.weight"}
    for i in range(LAYERS):
        for sub in ("attn.c_attn", "attn.c_proj", "ln_1", "mlp.c_fc", "mlp.c_proj", "ln_2"):
            expected |= {f"h.{i}.{sub}.weight", f"h.{i}.{sub}.bias"}
    assert names == expected
    sd = model.state_dict()
    assert sd["tokens_embed.weight"].shape == (V, EMBD)
    assert sd["positions_embed.weight"].shape == (CTX, EMBD)
    assert sd["h.0.attn.c_attn.weight"].shape == (3 * EMBD, EMBD)  # nn.Linear: (out, in)
    assert sd["h.0.mlp.c_fc.weight"].shape == (4 * EMBD, EMBD)
    assert sd["h.0.mlp.c_proj.weight"].shape == (EMBD, 4 * EMBD)


def test_initialisation() -> None:
    torch.manual_seed(0)
    m = GPT1(tiny_config(n_embd=64, vocab_size=500, n_ctx=64))
    for name, p in m.named_parameters():
        if name.endswith("weight") and p.dim() == 2:
            assert abs(p.std().item() - 0.02) < 0.002, name
            assert abs(p.mean().item()) < 0.002, name
        elif ".ln_" in name and name.endswith("weight"):
            assert torch.equal(p, torch.ones_like(p)), name
        else:  # biases of Linear and LayerNorm layers
            assert torch.equal(p, torch.zeros_like(p)), name


def test_post_layer_norm_block_outputs(model: GPT1) -> None:
    outputs: list[torch.Tensor] = []
    hooks = [block.register_forward_hook(lambda _m, _i, out: outputs.append(out))
             for block in model.h]
    with torch.no_grad():
        model(ids(2, CTX))
    for hook in hooks:
        hook.remove()
    assert len(outputs) == LAYERS
    for out in outputs:  # LayerNorm (gain 1, bias 0 at init) is the last thing each block does
        torch.testing.assert_close(out.mean(-1), torch.zeros(out.shape[:-1]), rtol=0,
                                   atol=1e-5)
        torch.testing.assert_close(out.var(-1, unbiased=False), torch.ones(out.shape[:-1]),
                                   rtol=0, atol=1e-3)
    # the embedding sum that feeds the first block is far from normalised
    emb = model.tokens_embed(ids(2, CTX)) + model.positions_embed.weight
    assert emb.var(-1, unbiased=False).mean() < 0.1


def test_num_parameters(model: GPT1) -> None:
    per_block = (EMBD * 3 * EMBD + 3 * EMBD) + (EMBD * EMBD + EMBD) + 2 * EMBD \
        + (EMBD * 4 * EMBD + 4 * EMBD) + (4 * EMBD * EMBD + EMBD) + 2 * EMBD
    assert model.num_parameters() == V * EMBD + CTX * EMBD + LAYERS * per_block


def test_lm_loss_ignores_ignore_index(model: GPT1) -> None:
    x = ids(2, 8)
    targets = x.roll(-1, dims=1)
    masked = targets.clone()
    masked[:, 4:] = -100
    logits = model.lm_logits(model(x))
    expected = torch.nn.functional.cross_entropy(logits[:, :4].reshape(-1, V),
                                                 targets[:, :4].reshape(-1))
    torch.testing.assert_close(model.lm_loss(x, masked), expected)


def test_save_and_load_round_trip(model: GPT1, tmp_path: Path) -> None:
    save_model(model, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "model.safetensors"]
    loaded = load_model(tmp_path).eval()
    assert loaded.config == model.config
    x = ids(2, CTX)
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), model(x), rtol=0, atol=0)
        torch.testing.assert_close(loaded.lm_logits(loaded(x)), model.lm_logits(model(x)),
                                   rtol=0, atol=0)


def test_config_round_trip(tmp_path: Path) -> None:
    cfg = tiny_config(embd_pdrop=0.25)
    cfg.save(tmp_path / "config.json")
    assert load_config(tmp_path / "config.json") == cfg


def test_load_model_missing_files(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"config\.json"):
        load_model(tmp_path)


def test_load_model_rejects_other_weights(model: GPT1, tmp_path: Path) -> None:
    save_model(model, tmp_path)
    state = {f"trunk.{k}": v for k, v in model.state_dict().items()}  # a fine-tuned classifier
    save_safetensors(state, tmp_path / "model.safetensors")
    with pytest.raises(ValueError, match=r"model\.safetensors: not the gpt1 trunk config\.json "
                                         r"describes \(\d+ weights missing.*under 'trunk\.'"):
        load_model(tmp_path)


def test_load_model_names_the_first_weight_the_config_does_not_fit(model: GPT1,
                                                                   tmp_path: Path) -> None:
    save_model(model, tmp_path)
    tiny_config(n_ctx=CTX + 1).save(tmp_path / "config.json")
    with pytest.raises(ValueError, match=r"model\.safetensors: positions_embed\.weight has shape "
                                         rf"\({CTX}, {EMBD}\), but config\.json makes it "
                                         rf"\({CTX + 1}, {EMBD}\)$"):
        load_model(tmp_path)
    tiny_config(n_layer=LAYERS + 1).save(tmp_path / "config.json")
    with pytest.raises(ValueError, match=r"\(12 weights missing, e\.g\. \['h\.2\..*\]; "
                                         r"0 unexpected, e\.g\. \[\]\)$"):  # no word of 'trunk.'
        load_model(tmp_path)


def test_load_model_cut_short_weights(model: GPT1, tmp_path: Path) -> None:
    save_model(model, tmp_path)
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(ValueError, match=r"model\.safetensors: not a readable safetensors file"):
        load_model(tmp_path)


BAD_CONFIGS = {
    "not JSON": ('{"vocab_size": 50,', r"not JSON \(Expecting"),
    "not an object": ("[50, 16]", r"expected a JSON object, found list"),
    "missing key": ({"n_layer": None}, r"missing keys \['n_layer'\]"),
    "unknown key": ({"n_inner": 128}, r"unknown keys \['n_inner'\]"),
    "string": ({"n_embd": "32"}, r"n_embd='32', expected an integer >= 1"),
    "bool": ({"n_head": True}, r"n_head=True, expected an integer >= 1"),
    "float size": ({"n_layer": 2.0}, r"n_layer=2\.0, expected an integer >= 1"),
    "zero": ({"vocab_size": 0}, r"vocab_size=0, expected an integer >= 1"),
    "negative rate": ({"attn_pdrop": -0.1}, r"attn_pdrop=-0\.1, expected a number >= 0"),
    "heads": ({"n_head": 5}, r"n_head=5 does not divide n_embd=32"),
}


@pytest.mark.parametrize("case", BAD_CONFIGS)
def test_config_load_names_the_file_and_key_at_fault(tmp_path: Path, case: str) -> None:
    change, message = BAD_CONFIGS[case]
    path = tmp_path / "config.json"
    if isinstance(change, str):
        path.write_text(change)
    else:
        fields = {**asdict(tiny_config()), **change}
        path.write_text(json.dumps({k: v for k, v in fields.items() if v is not None}))
    with pytest.raises(ValueError, match=rf"^{path}: {message}"):
        load_config(path)


def test_config_load_takes_integers_for_rates(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    tiny_config().save(path)
    path.write_text(path.read_text().replace('"embd_pdrop": 0.1', '"embd_pdrop": 0'))
    loaded = load_config(path)
    assert loaded == tiny_config(embd_pdrop=0.0) and isinstance(loaded.embd_pdrop, float)


def test_saved_weights_get_the_usual_file_mode(tmp_path: Path) -> None:
    umask = os.umask(0o022)
    try:
        save_model(GPT1(GPT1Config(vocab_size=10, n_ctx=4, n_embd=8, n_layer=1, n_head=2)),
                   tmp_path)
    finally:
        os.umask(umask)
    assert (tmp_path / "model.safetensors").stat().st_mode & 0o777 == 0o644


V, CTX, EMBD, LAYERS, HEADS = 60, 16, 32, 2, 4
CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")


def test_hidden_states_match_huggingface() -> None:
    torch.manual_seed(0)
    ours = GPT1(GPT1Config(vocab_size=V, n_ctx=CTX, n_embd=EMBD, n_layer=LAYERS,
                           n_head=HEADS)).eval()
    with torch.no_grad():
        for name, p in ours.named_parameters():
            if ".ln_" in name or name.endswith("bias"):  # non-trivial gains and biases
                p.add_(0.1 * torch.randn_like(p))
            elif name.startswith("h."):  # activations of order 1, where GELU variants differ
                p.mul_(10.0)
    hf = OpenAIGPTModel(OpenAIGPTConfig(
        vocab_size=V, n_positions=CTX, n_embd=EMBD, n_layer=LAYERS, n_head=HEADS, afn="gelu",
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, layer_norm_epsilon=1e-5)).eval()

    ours_sd = ours.state_dict()
    hf_sd = hf.state_dict()
    assert set(ours_sd) == set(hf_sd)  # the same parameter names
    mapped = {k: (v.T.contiguous() if k.endswith(CONV1D) else v) for k, v in ours_sd.items()}
    for k, v in mapped.items():
        assert hf_sd[k].shape == v.shape, k
    hf.load_state_dict(mapped, strict=True)

    x = torch.randint(0, V, (3, CTX), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        theirs = hf(input_ids=x).last_hidden_state
        mine = ours(x)
    diff = (mine - theirs).abs().max().item()
    assert diff <= 1e-5, f"max abs difference from OpenAIGPTModel: {diff:.2e}"
    assert mine.abs().max() > 0.5  # not trivially equal
