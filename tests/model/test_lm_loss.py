"""gpt1.model.lm_loss: the chunked head + cross-entropy gives F.cross_entropy's loss and
gradients."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from gpt1.model.lm_loss import linear_cross_entropy


def _inputs(vocab: int = 203, ignored: int = 7) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(0)
    hidden = torch.randn(3, 50, 32, generator=gen, requires_grad=True)
    weight = torch.randn(vocab, 32, generator=gen).mul_(0.3).requires_grad_()
    targets = torch.randint(0, vocab, (3, 50), generator=gen)
    targets[1, :ignored] = -100
    return hidden, weight, targets


def _reference(hidden, weight, targets):
    return F.cross_entropy(F.linear(hidden, weight).flatten(0, 1), targets.flatten(),
                           ignore_index=-100)


@pytest.mark.parametrize("chunk_rows", [1, 37, 150, 1024])
def test_loss_and_gradients_match_cross_entropy(chunk_rows: int) -> None:
    hidden, weight, targets = _inputs()
    want = _reference(hidden, weight, targets)
    want_grads = torch.autograd.grad(want * 2.5, (hidden, weight))
    got = linear_cross_entropy(hidden, weight, targets, chunk_rows=chunk_rows)
    got_grads = torch.autograd.grad(got * 2.5, (hidden, weight))
    torch.testing.assert_close(got, want)
    for g, w in zip(got_grads, want_grads, strict=True):
        torch.testing.assert_close(g, w)
    assert got_grads[0][1, :7].abs().max() == 0  # ignored rows get no gradient


def test_gradients_accumulate_with_other_uses_of_the_weight() -> None:
    """The head is tied to the token embedding: both gradients must add up."""
    hidden, weight, targets = _inputs()
    def extra() -> torch.Tensor:
        return weight[:5].square().sum()

    want = torch.autograd.grad(_reference(hidden, weight, targets) + extra(), weight)[0]
    got = torch.autograd.grad(linear_cross_entropy(hidden, weight, targets) + extra(), weight)[0]
    torch.testing.assert_close(got, want)


def test_without_gradients_it_is_cross_entropy() -> None:
    hidden, weight, targets = _inputs()
    with torch.no_grad():
        assert linear_cross_entropy(hidden, weight, targets) == _reference(hidden, weight, targets)


def test_all_targets_ignored_gives_nan_as_cross_entropy_does() -> None:
    hidden, weight, targets = _inputs()
    targets.fill_(-100)
    assert math.isnan(_reference(hidden, weight, targets).item())
    assert math.isnan(linear_cross_entropy(hidden, weight, targets).item())


def test_under_bf16_autocast_it_follows_autocasts_cross_entropy() -> None:
    hidden, weight, targets = _inputs()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want = F.cross_entropy(F.linear(hidden, weight).flatten(0, 1).float(),
                               targets.flatten())
        want_grads = torch.autograd.grad(want, (hidden, weight))
        got = linear_cross_entropy(hidden, weight, targets, chunk_rows=64)
        got_grads = torch.autograd.grad(got, (hidden, weight))
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, want, rtol=1e-2, atol=1e-2)
    for g, w in zip(got_grads, want_grads, strict=True):
        assert g.dtype == w.dtype
        torch.testing.assert_close(g, w, rtol=5e-2, atol=2e-3)
