"""The FLOP/s a device attains, which model FLOPs utilisation is measured against (a trunk's
config counts the FLOPs a training token needs: `TrunkConfig.training_flops_per_token`)."""

from __future__ import annotations

import math
import time

import torch


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
