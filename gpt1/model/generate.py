"""Sample text from a pretrained model: temperature, top-k, a seed, a token budget."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from gpt1.corpus.text import TextCleaner
from gpt1.errors import InputError
from gpt1.model.transformer import GPT1, KVCache
from gpt1.model.trunk import Trunk

if TYPE_CHECKING:
    from gpt1.config import SampleParams
    from gpt1.corpus.tokenizer import GPT1Tokenizer


@torch.no_grad()
def sample(model: Trunk, prompt_ids: list[int], max_new_tokens: int, temperature: float = 1.0,
           top_k: int | None = None, seed: int = 0) -> list[int]:
    """`max_new_tokens` ids continuing `prompt_ids`; temperature 0 picks the likeliest token.

    Only the last `n_ctx` tokens are seen at each step (GPT-1 has no longer memory). GPT1 keeps
    the keys and values of the tokens seen in a `KVCache` and computes only the new token's."""
    if not prompt_ids:
        raise InputError("the prompt is empty after tokenisation")
    if temperature < 0:
        raise InputError(f"temperature must be >= 0, got {temperature}")
    model.eval()
    device = next(model.parameters()).device
    generator = torch.Generator(device=device).manual_seed(seed)
    cache = KVCache(model.config.n_layer, model.config.n_ctx) if isinstance(model, GPT1) else None
    ids = list(prompt_ids)
    for _ in range(max_new_tokens):
        logits = _next_token_logits(model, ids, cache, device)
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


def _next_token_logits(model: Trunk, ids: list[int], cache: KVCache | None,
                       device: torch.device) -> torch.Tensor:
    """The fp32 logits (V,) of the token after `ids`, seen through the last `n_ctx` of them.

    With a cache (of `ids`' start), only the ids it lacks are computed, while they fit in `n_ctx`;
    past it the window slides, which moves every position, and the window is computed whole."""
    n_ctx = model.config.n_ctx
    if cache is None or len(ids) > n_ctx:
        hidden = model(torch.tensor([ids[-n_ctx:]], device=device))
    else:
        hidden = model(torch.tensor([ids[cache.length:]], device=device), cache)
    return model.lm_logits(hidden[:, -1]).float()[0]


def sample_text(model: Trunk, tokenizer: GPT1Tokenizer, cfg: SampleParams) -> dict[str, Any]:
    """`lm_eval.sample`'s prompt, cleaned as the corpus is, continued by the model (seeded): the
    settings that made the text, the prompt as the model read it and its continuation."""
    prompt_ids = tokenizer.encode(TextCleaner()(cfg.prompt))
    try:
        new_ids = sample(model, prompt_ids, cfg.tokens, cfg.temperature, cfg.top_k, cfg.seed)
    except InputError as err:
        raise InputError(f"lm_eval.sample.prompt: {err}") from None
    return {**cfg.model_dump(), "prompt_as_read": tokenizer.decode(prompt_ids),
            "continuation": tokenizer.decode(new_ids)}
