"""Dropout whose masks are drawn by numpy's PCG64 on the CPU: the same Bernoulli masks and
scaling as `F.dropout`, from a generator faster than torch's CPU generator, filled a chunk at a
time on as many threads as torch uses. On other devices, torch's own dropout (Philox on CUDA) is
already fast and is used, as it is in a graph torch.compile traces.
Measured: bench/results/findings.md ("Dropout: numpy's PCG64 against torch's bernoulli_", and
"Dropout masks from 16-bit words").

Each element's draw is a 16-bit word of PCG64's raw 64-bit outputs (four an output, least
significant first), kept where it is >= p rounded up to a multiple of 2^-16 (p = 0.1 drops with
probability 0.100006): a quarter of the generator's work of float32 draws, and no conversion to
float. Each mask's seed is drawn from torch's generator, so `torch.manual_seed` and the RNG
states a checkpoint saves still fix every mask. A mask is the stream of one PCG64 seeded so,
whatever the number of threads: each chunk's generator is advanced to where the chunk starts.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.profiler import record_function

# Draws per chunk: a multiple of WORDS (whole outputs), and small enough that a residual's mask
# (batch x context x width) splits between the threads.
CHUNK_DRAWS = 1 << 18
WORD_BITS = 16
WORDS = 64 // WORD_BITS  # draws per raw output of the generator

_pools: dict[tuple[int, int], ThreadPoolExecutor] = {}


def _pool(threads: int) -> ThreadPoolExecutor:
    """A pool of `threads` workers for this process (a forked child makes its own)."""
    key = (os.getpid(), threads)
    if key not in _pools:
        _pools[key] = ThreadPoolExecutor(threads, thread_name_prefix="dropout-mask")
    return _pools[key]


def keep_scale_mask(seed: int, numel: int, p: float) -> np.ndarray:
    """`numel` float32s, 1 / (1 - p) where PCG64(seed)'s 16-bit word is >= ceil(p * 2^16), else 0
    (p in (0, 1))."""
    scaled = np.empty(numel, dtype=np.float32)
    threshold = np.uint16(min(math.ceil(p * 2**WORD_BITS), 2**WORD_BITS - 1))
    scale = np.float32(1.0 / (1.0 - p))

    def fill(start: int) -> None:
        chunk = scaled[start:start + CHUNK_DRAWS]
        bits = np.random.PCG64(seed)
        bits.advance(start // WORDS)
        # little-endian whatever the machine: an output's least significant word comes first
        raw = bits.random_raw(-(-len(chunk) // WORDS)).astype("<u8", copy=False)
        words = raw.view("<u2")[:len(chunk)]
        np.multiply(words >= threshold, scale, out=chunk)

    starts = range(0, numel, CHUNK_DRAWS)
    threads = min(torch.get_num_threads(), len(starts))
    if threads > 1:
        list(_pool(threads).map(fill, starts))  # list: a worker's exception is raised here
    else:
        for start in starts:
            fill(start)
    return scaled


def dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """`F.dropout(x, p, training)`: each element zeroed with probability `p`, the rest scaled by
    1 / (1 - p)."""
    if _torch_does_it(x, p, training):
        return F.dropout(x, p, training)
    return x * _mask_like(x, p)


def dropout_add(residual: torch.Tensor, x: torch.Tensor, p: float,
                training: bool) -> torch.Tensor:
    """`residual + F.dropout(x, p, training)`, on the CPU in one pass (`addcmul`)."""
    if _torch_does_it(x, p, training):
        return residual + F.dropout(x, p, training)
    return torch.addcmul(residual, x, _mask_like(x, p))


def _torch_does_it(x: torch.Tensor, p: float, training: bool) -> bool:
    """No mask to draw (eval, p 0 or 1), a device whose own dropout is fast, or a graph
    torch.compile traces (its kernels draw the mask where they use it; a mask from numpy would
    break the graph, and sizes it traces symbolically cannot be cut into chunks)."""
    return (not training or p == 0.0 or p >= 1.0 or x.device.type != "cpu"
            or torch.compiler.is_compiling())


def _mask_like(x: torch.Tensor, p: float) -> torch.Tensor:
    """A dropout mask of 1 / (1 - p) and 0 in `x`'s shape and dtype, its seed from torch's RNG."""
    with record_function("dropout mask"):
        seed = int(torch.randint(0, 2**62, (1,)).item())
        scaled = keep_scale_mask(seed, x.numel(), p)
    return torch.from_numpy(scaled).view(x.shape).to(x.dtype)


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
