"""GPT-1's Transformer decoder (Radford et al. 2018, §3.1 and §4.1), readable beside the paper.

Post-LN blocks (LayerNorm after each residual sum), tanh-approximated GELU, learned position
embeddings, an LM head tied to the token embedding, dropout on embeddings, attention and
residuals, and N(0, 0.02) initialisation. Parameter names follow HuggingFace's `openai-gpt`
(`tokens_embed`, `h.0.attn.c_attn`, ...); our projections are `nn.Linear` (out, in), where HF's
`Conv1D` stores (in, out).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from gpt1.model.dropout import Dropout, dropout
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
    t = q.shape[-2]
    scores = (q @ k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)
    future = torch.ones(t, t, dtype=torch.bool, device=q.device).triu_(1)
    weights = scores.masked_fill(future, float("-inf")).softmax(dim=-1)
    return dropout(weights, p, training=True) @ v


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPT1Config) -> None:
        super().__init__()
        self.n_head = cfg.n_head
        self.attn_pdrop = cfg.attn_pdrop
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd)
        self.resid_dropout = Dropout(cfg.resid_pdrop)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        if self.training and self.attn_pdrop > 0 and x.device.type == "cpu":
            y = _causal_attention_with_dropout(q, k, v, self.attn_pdrop)
        else:
            y = F.scaled_dot_product_attention(
                q, k, v, is_causal=True, dropout_p=self.attn_pdrop if self.training else 0.0)
        y = y.transpose(1, 2).contiguous().view(b, t, c)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, cfg: GPT1Config) -> None:
        super().__init__()
        self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd)
        self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd)
        self.dropout = Dropout(cfg.resid_pdrop)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.c_proj(F.gelu(self.c_fc(x), approximate="tanh")))


class Block(nn.Module):
    """Post-LN: n = LN(x + attn(x)); h = LN(n + mlp(n))."""

    def __init__(self, cfg: GPT1Config) -> None:
        super().__init__()
        self.attn = CausalSelfAttention(cfg)
        self.ln_1 = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)
        self.mlp = MLP(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = self.ln_1(x + self.attn(x))
        return self.ln_2(n + self.mlp(n))


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

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        t = input_ids.shape[1]
        if t > self.config.n_ctx:
            raise ValueError(f"sequence length {t} exceeds n_ctx {self.config.n_ctx}")
        positions = torch.arange(t, device=input_ids.device)
        x = self.drop(self.tokens_embed(input_ids) + self.positions_embed(positions))
        for block in self.h:
            x = block(x)
        return x

    @property
    def lm_head_weight(self) -> torch.Tensor:
        return self.tokens_embed.weight
