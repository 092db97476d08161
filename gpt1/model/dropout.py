"""Dropout whose masks are drawn by numpy's PCG64 on the CPU: the same Bernoulli masks and
scaling as `F.dropout`, from a generator faster than torch's CPU generator. On other devices,
torch's own dropout (Philox on CUDA) is already fast and is used.
Measured: bench/results/findings.md ("Dropout: numpy's PCG64 against torch's bernoulli_").

Each mask's seed is drawn from torch's generator, so `torch.manual_seed` and the RNG states a
checkpoint saves still fix every mask.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.profiler import record_function


def dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """`F.dropout(x, p, training)`: each element zeroed with probability `p`, the rest scaled by
    1 / (1 - p)."""
    if not training or p == 0.0 or p >= 1.0 or x.device.type != "cpu":
        return F.dropout(x, p, training)
    with record_function("dropout mask"):
        seed = int(torch.randint(0, 2**62, (1,)).item())
        draws = np.random.Generator(np.random.PCG64(seed)).random(x.numel(), dtype=np.float32)
        # 1 / (1 - p) where kept, else 0, in the draws' memory: one multiply forward and backward
        scale = np.multiply(draws >= np.float32(p), np.float32(1.0 / (1.0 - p)), out=draws)
    return x * torch.from_numpy(scale).view(x.shape).to(x.dtype)


class Dropout(nn.Module):
    """`nn.Dropout` through `dropout` (no parameters: state dicts are unchanged)."""

    def __init__(self, p: float) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability must be in [0, 1], got {p}")
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"
