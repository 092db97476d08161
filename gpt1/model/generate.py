"""Sample text from a pretrained model: temperature, top-k, a seed, a token budget."""

from __future__ import annotations

import torch

from gpt1.model.trunk import Trunk


@torch.no_grad()
def sample(model: Trunk, prompt_ids: list[int], max_new_tokens: int, temperature: float = 1.0,
           top_k: int | None = None, seed: int = 0) -> list[int]:
    """`max_new_tokens` ids continuing `prompt_ids`; temperature 0 picks the likeliest token.

    Only the last `n_ctx` tokens are seen at each step (GPT-1 has no longer memory)."""
    if not prompt_ids:
        raise ValueError("the prompt is empty after tokenisation")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    model.eval()
    device = next(model.parameters()).device
    generator = torch.Generator(device=device).manual_seed(seed)
    ids = list(prompt_ids)
    for _ in range(max_new_tokens):
        window = torch.tensor([ids[-model.config.n_ctx:]], device=device)
        logits = model.lm_logits(model(window)[:, -1]).float()[0]
        if temperature == 0:
            ids.append(int(logits.argmax()))
            continue
        logits = logits / temperature
        if top_k is not None and top_k < logits.numel():
            cutoff = torch.topk(logits, top_k).values[-1]
            logits = logits.masked_fill(logits < cutoff, float("-inf"))
        probs = torch.softmax(logits, dim=-1)
        ids.append(int(torch.multinomial(probs, 1, generator=generator)))
    return ids[len(prompt_ids):]
