"""The paper's recurrent control (Table 5, "LSTM"): a single-layer LSTM language model in place of
the Transformer, read by the same task heads. Its hidden state at a token is what the heads take
as that token's state (the `<classify>` state for classification), so fine-tuning, its input
transformations and the auxiliary LM loss are the Transformer's, unchanged.

The paper's LSTM has 2048 units; `n_embd` is both the embedding width and the number of units,
and the LM head is tied to the token embedding as GPT-1's is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import nn

from gpt1.model.dropout import Dropout
from gpt1.model.trunk import Trunk, TrunkConfig


@dataclass(frozen=True)
class LSTMConfig(TrunkConfig):
    model_type: ClassVar[str] = "lstm"
    vocab_size: int
    n_ctx: int = 512  # the training window; the LSTM itself reads any length
    n_embd: int = 2048
    embd_pdrop: float = 0.1  # on the embeddings going in
    resid_pdrop: float = 0.1  # on the hidden states coming out
    initializer_range: float = 0.02

    def parameter_count(self) -> int:
        """The token table (also the LM head) and the four gates, each with an input and a
        recurrent matrix and two biases (PyTorch's layout)."""
        d = self.n_embd
        return self.vocab_size * d + 4 * (2 * d * d + 2 * d)

    def training_flops_per_token(self) -> float:
        """6 per weight that multiplies: the gates' 8 d^2 and the tied LM head."""
        return 6.0 * (8 * self.n_embd**2 + self.vocab_size * self.n_embd)


def width_for_parameters(parameters: int, vocab_size: int) -> int:
    """The widest `n_embd` whose LSTM has at most `parameters` parameters: the width that matches
    a Transformer's size (8 d^2 + (V + 8) d <= parameters)."""
    b = vocab_size + 8
    width = int((-b + math.sqrt(b * b + 32 * parameters)) / 16)
    while LSTMConfig(vocab_size, n_embd=width + 1).parameter_count() <= parameters:
        width += 1
    while width > 1 and LSTMConfig(vocab_size, n_embd=width).parameter_count() > parameters:
        width -= 1
    return width


class LSTM(Trunk):
    """Token ids -> embeddings -> one LSTM layer -> hidden states; the LM head is the token
    table."""

    config_class = LSTMConfig
    config: LSTMConfig

    def __init__(self, cfg: LSTMConfig) -> None:
        super().__init__(cfg)
        self.tokens_embed = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.embd_drop = Dropout(cfg.embd_pdrop)
        self.rnn = nn.LSTM(cfg.n_embd, cfg.n_embd, batch_first=True)
        self.out_drop = Dropout(cfg.resid_pdrop)
        nn.init.normal_(self.tokens_embed.weight, mean=0.0, std=cfg.initializer_range)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        hidden, _ = self.rnn(self.embd_drop(self.tokens_embed(input_ids)))
        return self.out_drop(hidden)

    @property
    def lm_head_weight(self) -> torch.Tensor:
        return self.tokens_embed.weight
