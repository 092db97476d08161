"""Our GPT1 matches HuggingFace's OpenAIGPTModel given the same weights (Conv1D = Linear.T)."""

from __future__ import annotations

import torch
from transformers import OpenAIGPTConfig, OpenAIGPTModel

from gpt1.model.transformer import GPT1, GPT1Config

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
