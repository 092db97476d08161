"""GPT-1's Transformer decoder (Radford et al. 2018, §3.1 and §4.1), readable beside the paper.

Post-LN blocks (LayerNorm after each residual sum), tanh-approximated GELU, learned position
embeddings, an LM head tied to the token embedding, dropout on embeddings, attention and
residuals, and N(0, 0.02) initialisation. Parameter names follow HuggingFace's `openai-gpt`
(`tokens_embed`, `h.0.attn.c_attn`, ...); our projections are `nn.Linear` (out, in), where HF's
`Conv1D` stores (in, out).

For inference, a `KVCache` keeps each layer's keys and values, so that a forward pass computes
only the tokens it is given (generation: one new token per step, a decode step of constant shapes
at a position held on the device, `KVCache.at`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from gpt1.model.dropout import Dropout, dropout, dropout_add
from gpt1.model.trunk import Trunk, TrunkConfig


@dataclass(frozen=True)
class GPT1Config(TrunkConfig):
    model_type: ClassVar[str] = "gpt1"
    vocab_size: int
    n_ctx: int = 512
    n_embd: int = 768
    n_layer: int = 12
    n_head: int = 12
    embd_pdrop: float = 0.1
    attn_pdrop: float = 0.1
    resid_pdrop: float = 0.1
    layer_norm_epsilon: float = 1e-5
    initializer_range: float = 0.02

    def check(self) -> str | None:
        if problem := super().check():
            return problem
        if self.n_embd % self.n_head:
            return f"n_head={self.n_head} does not divide n_embd={self.n_embd}"
        return None

    def parameter_count(self) -> int:
        """Token and position tables, and per block the attention (4 d^2 + 4 d), the MLP
        (8 d^2 + 5 d) and two LayerNorms (4 d). The LM head is the tied token table."""
        d = self.n_embd
        return (self.vocab_size + self.n_ctx) * d + self.n_layer * (12 * d * d + 13 * d)

    def training_flops_per_token(self) -> float:
        """PaLM's count (appendix B): 6 per weight that multiplies (every matrix and the tied LM
        head; the position table is a lookup) plus 12 per layer, context position and width for
        attention's scores and weighted sums."""
        d = self.n_embd
        per_layer = 4 * d * d + 8 * d * d  # c_attn (3 d^2) + attn c_proj (d^2); MLP 2 x 4 d^2
        matmul_weights = self.n_layer * per_layer + self.vocab_size * d
        return 6.0 * matmul_weights + 12.0 * self.n_layer * self.n_ctx * d


def _causal_attention_with_dropout(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                                   p: float) -> torch.Tensor:
    """What `scaled_dot_product_attention(..., is_causal=True, dropout_p=p)` computes on the CPU
    (its CPU kernels cannot drop weights, so it falls back to these steps), with the weights'
    dropout mask drawn by `gpt1.model.dropout`."""
    *batch, t, head_dim = q.shape
    q, k = q.reshape(-1, t, head_dim), k.reshape(-1, t, head_dim)
    # the scale and the causal mask inside the scores' matmul: alpha q k^T + (0 or -inf)
    future = torch.full((t, t), float("-inf"), dtype=q.dtype, device=q.device).triu_(1)
    scores = torch.baddbmm(future, q, k.transpose(1, 2), alpha=head_dim ** -0.5)
    weights = scores.softmax(dim=-1).view(*batch, t, t)
    return dropout(weights, p, training=True) @ v


class KVCache:
    """Each layer's keys and values of the tokens already seen, in `slots` positions allocated
    (zeroed) on first use in the dtype the layer computes in (autocast's where it is on).
    Inference only: a forward pass given the cache attends over it without dropout, and appends
    its tokens.

    Rows of a batch may hold prefixes of different lengths, right-padded: `mark_padding` marks
    the padding, which the tokens added after it neither attend to nor count as positions.

    A forward pass sees the slots filled so far, a Python int; a decode step (`at`) sees them all
    instead, at a position held on the device: the same shapes every token, no host sync."""

    def __init__(self, n_layer: int, slots: int) -> None:
        self.slots = slots
        self.length = 0  # slots filled, padding included; GPT1.forward advances it
        self.layers: list[tuple[torch.Tensor, torch.Tensor] | None] = [None] * n_layer
        self.padding: tuple[torch.Tensor, int] | None = None  # (rows' lengths, where it ends)

    def mark_padding(self, lengths: torch.Tensor) -> None:
        """Row b's tokens are its first `lengths[b]` slots (a tensor on the cache's device); the
        rest, up to `length`, is padding."""
        if self.padding is not None:
            raise ValueError("the cache's padding is already marked")
        self.padding = (lengths, self.length)

    def repeat_rows(self, counts: torch.Tensor) -> None:
        """Row b repeated `counts[b]` times, in order: one prefix for several continuations."""
        self.layers = [None if kv is None else (kv[0].repeat_interleave(counts, dim=0),
                                                kv[1].repeat_interleave(counts, dim=0))
                       for kv in self.layers]
        if self.padding is not None:
            lengths, end = self.padding
            self.padding = (lengths.repeat_interleave(counts), end)

    def at(self, position: torch.Tensor) -> KVCache:
        """This cache as a decode step sees it: one new token a row, at slot `position` (a device
        tensor (1,)), attending over every slot with those past it masked out. Its keys and
        values are written into this cache's tensors (which a forward pass allocated); `length`
        stays the caller's to keep."""
        return _DecodeStep(self, position)

    def positions(self, t: int, device: torch.device) -> torch.Tensor:
        """The positions of `t` new tokens: (t,), or (B, t) where rows have padding."""
        positions = torch.arange(self.length, self.length + t, device=device)
        if self.padding is None:
            return positions
        lengths, end = self.padding
        return positions - (end - lengths)[:, None]

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor,
               v: torch.Tensor) -> torch.Tensor:
        """Attention of new tokens' queries (B, n_head, t, head_dim) over the cached keys and
        their own, earlier and themselves; stores their keys and values."""
        t, end = q.shape[-2], self.length + q.shape[-2]
        kv = self.layers[layer]
        if kv is None:
            # zeroed: a decode step weighs the slots not yet written by 0, and 0 x NaN is NaN
            shape = (*k.shape[:2], self.slots, k.shape[-1])
            kv = self.layers[layer] = (k.new_zeros(shape), v.new_zeros(shape))
        keys, values = kv
        keys[:, :, self.length:end] = k
        values[:, :, self.length:end] = v
        visible = self._visible(t, q.device)
        return F.scaled_dot_product_attention(q, keys[:, :, :end], values[:, :, :end],
                                              attn_mask=visible,
                                              is_causal=visible is None and t > 1)

    def _visible(self, t: int, device: torch.device) -> torch.Tensor | None:
        """Which slots each new token attends to; None where causal attention says it: nothing
        cached (the square causal mask), or one new token (all slots are its past)."""
        if self.padding is None and (self.length == 0 or t == 1):
            return None
        slots = torch.arange(self.length + t, device=device)
        visible = slots <= torch.arange(self.length, self.length + t, device=device)[:, None]
        if self.padding is None:
            return visible
        lengths, end = self.padding
        return visible & ((slots < lengths[:, None, None, None]) | (slots >= end))  # (B,1,t,S)


class _DecodeStep(KVCache):
    """`KVCache.at`: a cache's tensors, its every slot seen by one token a row at `position`.
    Nothing in it follows the position as a Python int, which CUDA graphs would record as
    constants: the token's keys and values are written at the position by `index_copy_`, and
    its attention mask is computed from it on the device."""

    def __init__(self, cache: KVCache, position: torch.Tensor) -> None:
        if cache.padding is not None or any(kv is None for kv in cache.layers):
            raise ValueError("a decode step needs a cache that a forward pass filled, unpadded")
        super().__init__(len(cache.layers), cache.slots)
        self.layers = cache.layers
        self.position = position
        self.visible = torch.arange(cache.slots, device=position.device) <= position[:, None]

    def positions(self, t: int, device: torch.device) -> torch.Tensor:
        return self.position

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor,
               v: torch.Tensor) -> torch.Tensor:
        keys, values = self.layers[layer]
        keys.index_copy_(2, self.position, k)
        values.index_copy_(2, self.position, v)
        return F.scaled_dot_product_attention(q, keys, values, attn_mask=self.visible)


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPT1Config) -> None:
        super().__init__()
        self.n_head = cfg.n_head
        self.attn_pdrop = cfg.attn_pdrop
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd)

    def forward(self, x: torch.Tensor, cache: KVCache | None = None,
                layer: int = 0) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        if cache is not None:
            y = cache.attend(layer, q, k, v)
        elif self.training and self.attn_pdrop > 0 and x.device.type == "cpu":
            y = _causal_attention_with_dropout(q, k, v, self.attn_pdrop)
        else:
            y = F.scaled_dot_product_attention(
                q, k, v, is_causal=True, dropout_p=self.attn_pdrop if self.training else 0.0)
        y = y.transpose(1, 2).contiguous().view(b, t, c)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, cfg: GPT1Config) -> None:
        super().__init__()
        self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd)
        self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    """Post-LN: n = LN(x + attn(x)); h = LN(n + mlp(n)), each branch's output dropped out (p =
    resid_pdrop) as it joins the residual sum."""

    def __init__(self, cfg: GPT1Config) -> None:
        super().__init__()
        self.resid_pdrop = cfg.resid_pdrop
        self.attn = CausalSelfAttention(cfg)
        self.ln_1 = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)
        self.mlp = MLP(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)

    def forward(self, x: torch.Tensor, cache: KVCache | None = None,
                layer: int = 0) -> torch.Tensor:
        n = self.ln_1(dropout_add(x, self.attn(x, cache, layer), self.resid_pdrop, self.training))
        return self.ln_2(dropout_add(n, self.mlp(n), self.resid_pdrop, self.training))


class GPT1(Trunk):
    """The decoder trunk; its LM head is tied to the token embedding."""

    config_class = GPT1Config
    config: GPT1Config

    def __init__(self, cfg: GPT1Config) -> None:
        super().__init__(cfg)
        self.tokens_embed = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.positions_embed = nn.Embedding(cfg.n_ctx, cfg.n_embd)
        self.drop = Dropout(cfg.embd_pdrop)
        self.h = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.apply(self._init_weights)

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, nn.Linear | nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=self.config.initializer_range)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, input_ids: torch.Tensor, cache: KVCache | None = None,
                position: torch.Tensor | None = None) -> torch.Tensor:
        """Hidden states of `input_ids`; given a cache, of the tokens that follow its own, whose
        keys and values it gains. Given a `position` too (a device tensor (1,)), a decode step:
        `input_ids` (B, 1) at that position, through `cache.at(position)`; the cache's `length`
        and n_ctx are then the caller's to keep (checking them would read the device)."""
        if cache is not None and self.training:
            raise ValueError("a KV cache is for inference: call model.eval() first")
        if position is not None:
            if cache is None:
                raise ValueError("a decode step's position needs the KV cache it writes to")
            return self._hidden(input_ids, cache.at(position))
        t, start = input_ids.shape[1], 0 if cache is None else cache.length
        if start + t > self.config.n_ctx:
            raise ValueError(f"sequence length {start + t} exceeds n_ctx {self.config.n_ctx}")
        x = self._hidden(input_ids, cache)
        if cache is not None:
            cache.length += t
        return x

    def _hidden(self, input_ids: torch.Tensor, cache: KVCache | None) -> torch.Tensor:
        t = input_ids.shape[1]
        positions = (torch.arange(t, device=input_ids.device) if cache is None
                     else cache.positions(t, input_ids.device))
        x = self.drop(self.tokens_embed(input_ids) + self.positions_embed(positions))
        for layer, block in enumerate(self.h):
            x = block(x, cache, layer)
        return x

    @property
    def lm_head_weight(self) -> torch.Tensor:
        return self.tokens_embed.weight
