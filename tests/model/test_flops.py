"""gpt1.model.flops: the FLOPs a training token costs, and the device peak MFU is measured
against."""

from __future__ import annotations

import torch

from gpt1.model.flops import measure_peak_flops
from gpt1.model.transformer import GPT1, GPT1Config


def test_flops_per_token_is_six_per_multiplying_weight_plus_attention() -> None:
    cfg = GPT1Config(vocab_size=100, n_ctx=16, n_embd=32, n_layer=2, n_head=4)
    model = GPT1(cfg)
    multiplying = model.num_parameters() - model.positions_embed.weight.numel() - sum(
        p.numel() for name, p in model.named_parameters() if p.dim() == 1)  # biases, gains
    assert cfg.training_flops_per_token() == 6 * multiplying + 12 * 2 * 16 * 32


def test_paper_model_costs_about_six_times_its_parameters() -> None:
    paper = GPT1Config(vocab_size=40478 + 4)  # 12 x 768, ctx 512
    per_token = paper.training_flops_per_token()
    assert 0.74e9 < per_token < 0.76e9  # 6 x 116.0M multiplying weights + 0.057e9 attention


def test_measured_peak_is_plausible_and_leaves_the_rng_alone() -> None:
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    peak = measure_peak_flops(torch.device("cpu"), torch.float32, seconds=0.05)
    assert torch.equal(torch.rand(3), expected)
    assert 1e8 < peak < 1e14  # any CPU: between 0.1 GFLOP/s and 100 TFLOP/s
