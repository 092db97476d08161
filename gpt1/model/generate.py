"""Sample text from a pretrained model: temperature, top-k, a seed, a token budget."""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from gpt1.corpus.text import TextCleaner
from gpt1.errors import InputError
from gpt1.model.transformer import GPT1, KVCache
from gpt1.model.trunk import Trunk

if TYPE_CHECKING:
    from gpt1.config import SampleParams
    from gpt1.corpus.tokenizer import GPT1Tokenizer

# The host reads the new ids back every READ_OUT tokens. A read waits for the device to finish
# all it was given: one every token would leave the device idle while the host prepares the next
# step; one every READ_OUT tokens costs that wait once per READ_OUT, and keeps the host from
# queuing more than READ_OUT steps ahead of the device (an error there surfaces at the next read).
READ_OUT = 64

DecodeFn = Callable[[GPT1, KVCache, torch.Tensor, torch.Tensor], torch.Tensor]


@torch.no_grad()
def sample(model: Trunk, prompt_ids: list[int], max_new_tokens: int, temperature: float = 1.0,
           top_k: int | None = None, seed: int = 0) -> list[int]:
    """`max_new_tokens` ids continuing `prompt_ids`; temperature 0 picks the likeliest token.

    Only the last `n_ctx` tokens are seen at each step (GPT-1 has no longer memory). The ids
    stay on the device, each chosen there and the next step's input read off them; the host
    reads them back every `READ_OUT` tokens. How each step's logits are computed: `token_logits`."""
    if not prompt_ids:
        raise InputError("the prompt is empty after tokenisation")
    if temperature < 0:
        raise InputError(f"temperature must be >= 0, got {temperature}")
    model.eval()
    device = next(model.parameters()).device
    generator = torch.Generator(device=device).manual_seed(seed)
    start, end = len(prompt_ids), len(prompt_ids) + max(max_new_tokens, 0)
    tokens = F.pad(torch.tensor(prompt_ids, device=device), (0, end - start))
    new_ids: list[int] = []
    for n, logits in enumerate(token_logits(model, tokens, start), start):
        tokens[n:n + 1] = _choose(logits, temperature, top_k, generator)
        if n + 1 == end or (n + 1 - start) % READ_OUT == 0:
            new_ids += tokens[start + len(new_ids):n + 1].tolist()
    return new_ids


def token_logits(model: Trunk, tokens: torch.Tensor, start: int) -> Iterator[torch.Tensor]:
    """The fp32 logits (V,) of each of `tokens` (T,) from `start` on, seen through the last
    `n_ctx` tokens before it. Each token is to be written in before the next's logits are asked
    for, and each logits tensor read before then (on CUDA, the next step overwrites it).

    GPT1 computes the prompt once into a `KVCache` of the run's length, then each new token alone
    in a decode step (`_decoder`): the same shapes every token, at a position sliced from a
    device tensor. Past n_ctx the window slides, which moves every position, and the window
    (1, n_ctx) is computed whole; other trunks compute the window every token."""
    n_ctx, end = model.config.n_ctx, len(tokens)
    windowed = start
    if isinstance(model, GPT1) and start <= n_ctx and start < end:
        cache = KVCache(model.config.n_layer, min(n_ctx, end))
        yield _last_logits(model, model(tokens[None, :start], cache))
        decode, positions = _decoder(model, cache), torch.arange(cache.slots, device=tokens.device)
        for n in range(start + 1, min(end, n_ctx + 1)):  # token n - 1 into slot n - 1
            yield decode(model, cache, tokens[n - 1:n].view(1, 1), positions[n - 1:n])
        windowed = n_ctx + 1
    for n in range(windowed, end):
        yield _last_logits(model, model(tokens[None, max(0, n - n_ctx):n]))


def _decode_step(model: GPT1, cache: KVCache, token: torch.Tensor,
                 position: torch.Tensor) -> torch.Tensor:
    """The fp32 logits (V,) of the token after `token` (1, 1), which takes `cache`'s slot
    `position` (1,)."""
    return _last_logits(model, model(token, cache, position))


def _last_logits(model: Trunk, hidden: torch.Tensor) -> torch.Tensor:
    return model.lm_logits(hidden[:, -1]).float()[0]


def _compiles(device: torch.device) -> bool:
    """Whether decode steps run compiled into CUDA graphs (`mode="reduce-overhead"`): on CUDA,
    where a step of one token is mostly kernel launches, which a graph replays as one; the
    static cache gives a graph what it needs, the same shapes every token and no sync inside.
    Not on the CPU, which has no launches to save: compiled, params.yaml's model decoded 1.3x
    faster there, but compiling took 9-22 s (again for each new length), tens of thousands of
    tokens' worth, against 0.2 s for bench.generate's 256 tokens eager."""
    return device.type == "cuda"


@dataclass
class _Compiled:
    """A model's decode step compiled into CUDA graphs, and the cache tensors its graphs were
    recorded over (at other addresses, a graph is recorded again). The model's runs share them,
    one at a time."""

    step: DecodeFn
    layers: list = field(default_factory=list)

    def adopt(self, cache: KVCache) -> None:
        """`cache`, just filled, decodes over the graphs' tensors, its own copied in, where they
        have its shapes; else its tensors become the graphs', marked static (a CUDA graph
        copies its inputs into memory of its own at every call, and runs none that writes to
        them, but to static ones)."""
        kept, new = (list(itertools.chain.from_iterable(layers))
                     for layers in (self.layers, cache.layers))
        if [(t.shape, t.dtype, t.device) for t in kept] == [(t.shape, t.dtype, t.device)
                                                            for t in new]:
            for old, filled in zip(kept, new, strict=True):
                old.copy_(filled)
            cache.layers = self.layers
            return
        for tensor in new:
            torch._dynamo.mark_static_address(tensor)
        self.layers = cache.layers


_COMPILED: weakref.WeakKeyDictionary[GPT1, _Compiled] = weakref.WeakKeyDictionary()


def _decoder(model: GPT1, cache: KVCache) -> DecodeFn:
    """`_decode_step` over `cache`, which a forward pass filled; compiled where `_compiles` says,
    once per model, so that a later `sample` call reuses its graphs (a second `torch.compile`
    would compile them again)."""
    if not _compiles(next(model.parameters()).device):
        return _decode_step
    if model not in _COMPILED:
        _COMPILED[model] = _Compiled(torch.compile(_decode_step, mode="reduce-overhead",
                                                   fullgraph=True))
    _COMPILED[model].adopt(cache)
    return _COMPILED[model].step


def _choose(logits: torch.Tensor, temperature: float, top_k: int | None,
            generator: torch.Generator) -> torch.Tensor:
    """The next id (1,), chosen on the logits' device: the likeliest at temperature 0, else drawn
    from softmax(logits / temperature) over the `top_k` likeliest."""
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    logits = logits / temperature
    if top_k is not None and top_k < logits.numel():
        cutoff = torch.topk(logits, top_k).values[-1]
        logits = logits.masked_fill(logits < cutoff, float("-inf"))
    # torch.multinomial's draw of one sample (the exponential race: argmax p / q, q ~ Exp(1)),
    # the same ids from the same generator, without its check of the probabilities, which reads
    # them back to the host: a sync every token on CUDA
    probs = torch.softmax(logits, dim=-1)
    race = torch.empty_like(probs).exponential_(1, generator=generator)
    return (probs / race).argmax(dim=-1, keepdim=True)


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
