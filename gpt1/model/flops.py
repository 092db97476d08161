"""Model FLOPs utilisation: the training FLOPs a step needs against what the device can do."""

from __future__ import annotations

import math
import time

import torch

from gpt1.model.transformer import GPT1Config


def training_flops_per_token(cfg: GPT1Config) -> float:
    """Forward + backward FLOPs per token (PaLM, appendix B): 6 per weight that multiplies
    (every matrix and the tied LM head; the position table is a lookup) plus 12 per layer,
    context position and width for attention's scores and weighted sums."""
    d = cfg.n_embd
    per_layer = 4 * d * d + 8 * d * d  # c_attn (3 d^2) + attn c_proj (d^2); MLP 2 x 4 d^2
    matmul_weights = cfg.n_layer * per_layer + cfg.vocab_size * d
    return 6.0 * matmul_weights + 12.0 * cfg.n_layer * cfg.n_ctx * d


def measure_peak_flops(device: torch.device, dtype: torch.dtype, seconds: float = 0.5) -> float:
    """FLOP/s of the fastest of repeated large square matmuls in `dtype` on `device`: the
    attainable peak of this machine (the fastest run is the one least disturbed by other work).

    A datasheet peak is higher than any measurement; set `pretrain.peak_tflops` to use one.
    """
    n = 8192 if device.type == "cuda" else 2048
    a = torch.full((n, n), 0.5, device=device, dtype=dtype)  # no draw from the training RNG
    b = torch.full((n, n), 0.5, device=device, dtype=dtype)
    torch.mm(a, b)  # warm-up: kernels chosen, memory allocated
    _sync(device)
    fastest, deadline = math.inf, time.perf_counter() + seconds
    while True:
        started = time.perf_counter()
        torch.mm(a, b)
        _sync(device)
        finished = time.perf_counter()
        fastest = min(fastest, finished - started)
        if finished >= deadline:
            return 2.0 * n**3 / fastest


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
