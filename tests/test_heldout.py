"""gpt1.training.heldout: every held-out token predicted once, in windows of n_ctx, per token and
per word."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from gpt1.model.transformer import GPT1, GPT1Config
from gpt1.training.device import placement
from gpt1.training.heldout import text_loss

CPU = placement("cpu", "fp32")


def _model() -> GPT1:
    torch.manual_seed(0)
    return GPT1(GPT1Config(vocab_size=20, n_ctx=8, n_embd=16, n_layer=2, n_head=2))


@pytest.mark.parametrize("length", [2, 9, 17, 30])  # one window; exactly full; and a short last
def test_the_loss_sums_each_windows_predictions(length: int) -> None:
    model = _model().eval()  # the reference below must not drop out either
    ids = np.random.default_rng(0).integers(0, 20, size=length).astype(np.uint16)
    result = text_loss(model, ids, words=5, batch_size=2, placement=CPU)
    expected, predicted = 0.0, 0
    for start in range(0, length - 1, 8):  # windows of 9 tokens overlapping by one
        window = torch.tensor(ids[start:start + 9].astype(np.int64))[None]
        logits = model.lm_logits(model(window[:, :-1]))[0]
        expected += F.cross_entropy(logits, window[0, 1:], reduction="sum").item()
        predicted += window.shape[1] - 1
    assert result.tokens == predicted == length - 1
    assert result.nats == pytest.approx(expected, rel=1e-5)
    assert result.per_token == pytest.approx(expected / (length - 1), rel=1e-5)
    assert result.per_word == pytest.approx(expected / 5, rel=1e-5)
    assert result.word_perplexity == pytest.approx(math.exp(expected / 5), rel=1e-5)


def test_an_untrained_model_is_near_chance_and_its_mode_is_kept() -> None:
    model = _model().train()
    ids = np.arange(200, dtype=np.uint16) % 20
    result = text_loss(model, ids, words=100, batch_size=4, placement=CPU)
    assert abs(result.per_token - math.log(20)) < 0.5  # N(0, 0.02) weights: near uniform
    assert model.training


def test_too_short_a_text_is_refused() -> None:
    with pytest.raises(ValueError, match="a loss needs two tokens and a word"):
        text_loss(_model(), np.array([3], dtype=np.uint16), words=1, batch_size=1, placement=CPU)
