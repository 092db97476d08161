"""gpt1.model.transfer: the first k blocks and the embeddings come from the pretrained model, the
rest is the fresh initialisation of the seed (Figure 2, left)."""

from __future__ import annotations

import pytest
import torch

from gpt1.model.transfer import transfer_layers
from gpt1.model.transformer import GPT1, GPT1Config

CFG = GPT1Config(vocab_size=30, n_ctx=8, n_embd=16, n_layer=3, n_head=2)


def _pretrained() -> GPT1:
    torch.manual_seed(123)
    model = GPT1(CFG)
    with torch.no_grad():  # unlike any initialisation: "pretrained"
        for p in model.parameters():
            p.add_(1.0)
    return model


def _fresh(seed: int) -> dict[str, torch.Tensor]:
    torch.manual_seed(seed)
    return GPT1(CFG).state_dict()


@pytest.mark.parametrize("k", [0, 1, 2, 3])
def test_blocks_below_k_and_embeddings_are_pretrained_the_rest_fresh(k: int) -> None:
    pretrained, fresh = _pretrained().state_dict(), _fresh(7)
    model = transfer_layers(_pretrained(), k, seed=7).state_dict()
    assert model.keys() == fresh.keys()
    for name, tensor in model.items():
        block = int(name.split(".")[1]) if name.startswith("h.") else None
        from_pretrained = block < k if block is not None else k >= 1  # embeddings once k >= 1
        expected = pretrained[name] if from_pretrained else fresh[name]
        assert torch.equal(tensor, expected), (name, k)


def test_the_global_rng_is_left_alone() -> None:
    pretrained = _pretrained()
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    transfer_layers(pretrained, 1, seed=7)
    assert torch.equal(torch.rand(3), expected)


@pytest.mark.parametrize("k", [-1, 4])
def test_k_beyond_the_blocks_is_refused(k: int) -> None:
    with pytest.raises(ValueError, match=rf"layers to transfer: {k}, expected 0 \.\. n_layer = 3"):
        transfer_layers(_pretrained(), k, seed=0)
