"""Will it fit: the memory a training run needs and the disk its outputs take, checked before
anything is allocated or written, so that a size typo fails in a second with the numbers instead
of minutes later inside an allocator."""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

import psutil
import torch

from gpt1.errors import InputError
from gpt1.model.transformer import GPT1Config

GB = 1e9
FP32 = 4
# per parameter while training: fp32 weights, gradients and Adam's two moments
TRAINING_BYTES_PER_PARAMETER = 4 * FP32


def training_bytes(cfg: GPT1Config, batch_size: int) -> int:
    """A lower bound of the memory a training step takes: the weights with their gradients and
    optimiser state, one activation per block kept for the backward pass, and one block's
    attention weights."""
    activations = batch_size * cfg.n_ctx * cfg.n_embd * FP32 * cfg.n_layer
    attention = batch_size * cfg.n_head * cfg.n_ctx * cfg.n_ctx * FP32
    return TRAINING_BYTES_PER_PARAMETER * cfg.parameter_count() + activations + attention


def available_memory(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    return psutil.virtual_memory().available


def check_memory(cfg: GPT1Config, batch_size: int, device: torch.device, knobs: str) -> None:
    """ValueError naming `knobs` when training `cfg` cannot fit in `device`'s free memory."""
    need, have = training_bytes(cfg, batch_size), available_memory(device)
    if need > have:
        raise InputError(f"{knobs}: training needs at least {need / GB:.1f} GB "
                         f"({cfg.parameter_count() / 1e6:.1f}M parameters, n_ctx {cfg.n_ctx}), "
                         f"more than the {have / GB:.1f} GB free on {device}")


def _size(n: float) -> str:
    return f"{n / GB:.2f} GB" if n >= GB / 10 else f"{n / 1e6:.2f} MB"


def check_disk(path: Path, need: int, what: str) -> None:
    """OSError (no space left) when the file system holding `path` has less than `need` bytes
    free."""
    path = Path(path)
    existing = next(p for p in (path, *path.parents) if p.exists())
    free = shutil.disk_usage(existing).free
    if need > free:
        raise OSError(errno.ENOSPC, f"{what} need about {_size(need)}, {_size(free)} is free",
                      str(path))
