"""gpt1.model.lstm: the paper's recurrent control (Table 5) behind the trunk interface: its size,
causality and a width matched to a Transformer's size (tests/model/test_trunk.py pretrains, saves,
loads and generates with it; tests/training/test_finetune_loop.py fine-tunes it on every family)."""

from __future__ import annotations

import pytest
import torch

from gpt1.model.lstm import LSTM, LSTMConfig, width_for_parameters
from gpt1.model.transformer import GPT1Config

pytestmark = pytest.mark.usefixtures("one_torch_thread")

V, CTX = 12, 16


def _lstm(dropout: float = 0.0) -> LSTM:
    torch.manual_seed(0)
    return LSTM(LSTMConfig(vocab_size=V, n_ctx=CTX, n_embd=24, embd_pdrop=dropout,
                           resid_pdrop=dropout))


def test_parameter_count_is_the_models() -> None:
    model = _lstm()
    assert model.config.parameter_count() == model.num_parameters()
    assert model.lm_head_weight is model.tokens_embed.weight  # tied, as GPT-1's


def test_the_papers_width_and_a_width_matched_to_gpt1() -> None:
    assert LSTMConfig(vocab_size=40478).n_embd == 2048  # "a single layer 2048 unit LSTM"
    gpt1 = GPT1Config(vocab_size=504, n_ctx=64, n_embd=64, n_layer=4, n_head=4)
    width = width_for_parameters(gpt1.parameter_count(), 504)
    assert (LSTMConfig(504, n_embd=width).parameter_count() <= gpt1.parameter_count()
            < LSTMConfig(504, n_embd=width + 1).parameter_count())


def test_a_state_depends_only_on_the_tokens_before_it() -> None:
    """What the heads read at `<classify>` and what the LM predicts from must not see later
    tokens (and so right padding changes nothing)."""
    model = _lstm().eval()
    ids = torch.tensor([[1, 2, 3, 4, 5, 6]])
    changed = torch.tensor([[1, 2, 3, 9, 9, 9]])
    a, b = model(ids), model(changed)
    assert torch.equal(a[:, :3], b[:, :3]) and not torch.equal(a[:, 3:], b[:, 3:])


def test_dropout_only_in_training() -> None:
    model = _lstm(dropout=0.5)
    ids = torch.tensor([[1, 2, 3, 4]])
    model.train()
    assert not torch.equal(model(ids), model(ids))
    model.eval()
    assert torch.equal(model(ids), model(ids))
