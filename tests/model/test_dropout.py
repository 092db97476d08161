"""gpt1.model.dropout and the CPU attention path that uses it: F.dropout's masks and scaling."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from gpt1.model.dropout import CHUNK_DRAWS, Dropout, dropout, dropout_add, keep_scale_mask
from gpt1.model.transformer import _causal_attention_with_dropout


def test_drops_a_fraction_p_and_scales_the_rest() -> None:
    torch.manual_seed(0)
    x = torch.rand(1_000_000) + 1.0
    y = dropout(x, 0.1, training=True)
    dropped = (y == 0).float().mean().item()
    assert abs(dropped - 0.1) < 0.002  # 1M Bernoulli(0.1) draws: sd 0.0003
    kept = y != 0
    torch.testing.assert_close(y[kept], x[kept] / 0.9)


def test_masks_follow_torchs_seed() -> None:
    x = torch.ones(64, 64)
    torch.manual_seed(3)
    first = dropout(x, 0.5, training=True)
    torch.manual_seed(3)
    again = dropout(x, 0.5, training=True)
    assert torch.equal(first, again)
    assert not torch.equal(again, dropout(x, 0.5, training=True))  # the next draw differs


def test_a_mask_is_one_pcg64_stream_whatever_the_threads() -> None:
    # restated: PCG64(seed)'s raw 64-bit outputs cut into 16-bit words, least significant first;
    # kept where a word, as a fraction of 2^16, is not below p (rounded up to such a fraction)
    n, p, seed = 3 * CHUNK_DRAWS + 10, 0.1, 1234
    outputs = np.random.PCG64(seed).random_raw(n // 4 + 1)
    words = [(int(out) >> shift) & 0xFFFF for out in outputs for shift in (0, 16, 32, 48)][:n]
    kept = np.array(words) >= 6554  # 0.1 * 65536 = 6553.6, rounded up
    want = np.where(kept, np.float32(1 / (1 - p)), np.float32(0))
    threads = torch.get_num_threads()
    try:
        for count in (1, 2, 3):
            torch.set_num_threads(count)
            assert np.array_equal(keep_scale_mask(seed, n, p), want), count
    finally:
        torch.set_num_threads(threads)


def test_a_small_p_drops_at_least_one_word_in_65536() -> None:
    # p below 2^-16 still drops (rounded up), and p just below 1 still keeps a word in 65,536
    mask = keep_scale_mask(7, 4 * 65536, 1e-9)
    assert 0 < (mask == 0).sum() < 16  # expected 4
    mask = keep_scale_mask(7, 4 * 65536, 1 - 1e-9)
    assert 0 < (mask != 0).sum() < 16


def test_dropout_add_is_the_residual_plus_the_dropped_branch() -> None:
    torch.manual_seed(2)
    residual = torch.randn(512, 256, requires_grad=True)
    branch = torch.randn(512, 256, requires_grad=True)
    y = dropout_add(residual, branch, 0.2, training=True)
    y.sum().backward()
    mask = branch.grad
    torch.testing.assert_close(residual.grad, torch.ones_like(residual))
    assert set(mask.unique().tolist()) == {0.0, 1 / 0.8}
    assert abs((mask == 0).float().mean().item() - 0.2) < 0.01  # 131,072 draws: sd 0.0011
    torch.testing.assert_close(y, residual + branch * mask)
    assert torch.equal(dropout_add(residual, branch, 0.2, training=False), residual + branch)


def test_gradient_is_the_mask() -> None:
    torch.manual_seed(1)
    x = torch.randn(32, 16, requires_grad=True)
    y = dropout(x, 0.25, training=True)
    y.sum().backward()
    torch.testing.assert_close(x.grad, (y != 0).float() / 0.75)


def test_identity_in_eval_and_at_zero_and_dtype_kept() -> None:
    x = torch.randn(8, 8, dtype=torch.bfloat16)
    module = Dropout(0.1).eval()
    assert torch.equal(module(x), x)
    assert torch.equal(dropout(x, 0.0, training=True), x)
    assert dropout(x, 0.1, training=True).dtype == torch.bfloat16
    assert torch.equal(dropout(x, 1.0, training=True), torch.zeros_like(x))


def test_attention_steps_are_sdpas() -> None:
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 10, 8) for _ in range(3))
    want = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(_causal_attention_with_dropout(q, k, v, 0.0), want)


def test_attention_with_dropout_stays_causal() -> None:
    q, k, v = (torch.randn(1, 2, 10, 8) for _ in range(3))
    torch.manual_seed(5)
    before = _causal_attention_with_dropout(q, k, v, 0.3)
    k2, v2 = k.clone(), v.clone()
    k2[..., 6:, :] += 1.0  # change the future of positions 0..5
    v2[..., 6:, :] -= 1.0
    torch.manual_seed(5)
    after = _causal_attention_with_dropout(q, k2, v2, 0.3)
    torch.testing.assert_close(after[..., :6, :], before[..., :6, :])
    assert not torch.allclose(after[..., 6:, :], before[..., 6:, :])


def test_a_compiled_graph_draws_its_masks_in_the_graph() -> None:
    """torch.compile (fine-tuning's, with dynamic shapes) traces dropout into one graph: the
    numpy mask would break it, and cannot be cut into chunks of a symbolic size."""
    x = torch.ones(4, 64, 32)
    q = k = v = torch.randn(2, 2, 16, 8)
    drop = torch.compile(lambda x: dropout_add(x, dropout(x, 0.5, True), 0.5, True),
                         backend="eager", dynamic=True, fullgraph=True)
    assert set(drop(x).unique().tolist()) == {1.0, 5.0}  # x + dropped (0 | 2x): 1 + (0 | 4)
    attend = torch.compile(_causal_attention_with_dropout, backend="eager", dynamic=True,
                           fullgraph=True)
    assert attend(q, k, v, 0.5).shape == (2, 2, 16, 8)
