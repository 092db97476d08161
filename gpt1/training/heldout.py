"""A language model's loss on held-out text (issue 13's held-out evaluation): every token of a
stream predicted once, from the tokens before it in its window of `n_ctx`, in nats per token and
per word, so that models with different vocabularies compare."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from gpt1.errors import InputError
from gpt1.model.trunk import Trunk
from gpt1.training.device import Placement, autocast


@dataclass(frozen=True)
class TextLoss:
    nats: float  # summed over the predicted tokens
    tokens: int  # tokens predicted: all but the first
    words: int  # words of the text the tokens encode

    @property
    def per_token(self) -> float:
        return self.nats / self.tokens

    @property
    def per_word(self) -> float:
        return self.nats / self.words

    @property
    def perplexity(self) -> float:
        return math.exp(self.per_token)

    @property
    def word_perplexity(self) -> float:
        return math.exp(self.per_word)


@torch.no_grad()
def text_loss(model: Trunk, ids: np.ndarray, words: int, batch_size: int,
              placement: Placement) -> TextLoss:
    """The loss of `model` on the token stream `ids` (the encoding of a text of `words` words),
    read in consecutive windows of `n_ctx` + 1 tokens that overlap by one: each window's first
    token is the previous one's last, so every token but the stream's first is predicted once,
    the context starting afresh at each window."""
    if len(ids) < 2 or words < 1:
        raise InputError(f"held-out text of {len(ids)} tokens and {words} words: a loss needs "
                         "two tokens and a word at least")
    was_training = model.training
    model.eval()
    n_ctx = model.config.n_ctx
    starts = range(0, len(ids) - 1, n_ctx)
    windows = [torch.from_numpy(ids[s:s + n_ctx + 1].astype(np.int64)) for s in starts]
    nats = 0.0
    for i in range(0, len(windows), batch_size):
        batch = windows[i:i + batch_size]
        same_length = [w for w in batch if len(w) == len(batch[0])]
        for group in (same_length, batch[len(same_length):]):  # only the last window is shorter
            if group:
                tokens = torch.stack(group).to(placement.device)
                with autocast(placement.device, placement.dtype):
                    logits = model.lm_logits(model(tokens[:, :-1]))
                nats += F.cross_entropy(logits.float().flatten(0, 1), tokens[:, 1:].flatten(),
                                        reduction="sum").item()
    model.train(was_training)
    return TextLoss(nats=nats, tokens=len(ids) - 1, words=words)
