"""How many pretrained layers a fine-tuned model starts from (paper §5, Figure 2 left): the
embeddings and the first k blocks of a pretrained GPT-1, the rest initialised afresh."""

from __future__ import annotations

import torch

from gpt1.model.transformer import GPT1

EMBEDDINGS = ("tokens_embed.", "positions_embed.")


def transfer_layers(pretrained: GPT1, k: int, seed: int) -> GPT1:
    """A GPT-1 of `pretrained`'s config holding its token and position embeddings and its first
    `k` blocks (none of it for k = 0: a model that was not pretrained), every other weight the
    fresh initialisation seeded by `seed`. Leaves the global RNG as it was."""
    n_layer = pretrained.config.n_layer
    if not 0 <= k <= n_layer:
        raise ValueError(f"layers to transfer: {k}, expected 0 .. n_layer = {n_layer}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = GPT1(pretrained.config)
    if k:
        kept = EMBEDDINGS + tuple(f"h.{i}." for i in range(k))
        state = {name: tensor for name, tensor in pretrained.state_dict().items()
                 if name.startswith(kept)}
        model.load_state_dict(state, strict=False)
    return model
