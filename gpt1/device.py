"""Pick the device and the numeric precision a run uses."""

from __future__ import annotations

import contextlib

import torch


def resolve_device(name: str) -> torch.device:
    """`auto` is the first CUDA device when there is one, else the CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {name!r} requested but CUDA is not available")
    return device


def resolve_dtype(precision: str, device: torch.device) -> torch.dtype:
    """`auto` is bf16 on CUDA and fp32 on the CPU."""
    if precision == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    return {"fp32": torch.float32, "bf16": torch.bfloat16}[precision]


def autocast(device: torch.device, dtype: torch.dtype) -> contextlib.AbstractContextManager:
    """Mixed precision for `dtype` below fp32, a no-op context otherwise."""
    if dtype == torch.float32:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


def configure_backends(device: torch.device) -> None:
    """TF32 matmuls on CUDA: fp32 accuracy is not needed where bf16 autocast already runs."""
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
