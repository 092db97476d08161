"""Pick the device and the numeric precision a run uses."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from gpt1.errors import InputError
from gpt1.machine import cpu_has_amx, cpu_has_native_bf16, machine
from gpt1.training.allocator import keep_freed_memory

if TYPE_CHECKING:
    from gpt1.config import Compile


def resolve_device(name: str) -> torch.device:
    """`auto` is the first CUDA device when there is one, else the CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise InputError(f"device {name!r} requested but CUDA is not available")
    return device


def resolve_dtype(precision: str, device: torch.device) -> torch.dtype:
    """`auto` is bf16 autocast where it trains faster than fp32 (CUDA; CPUs with AMX), fp32
    elsewhere: on a CPU with AVX512-BF16 but no AMX too, where bf16 measured slower."""
    if precision == "auto":
        faster = device.type == "cuda" or (device.type == "cpu" and cpu_has_amx())
        return torch.bfloat16 if faster else torch.float32
    return {"fp32": torch.float32, "bf16": torch.bfloat16}[precision]


def inference_dtype(precision: str, device: torch.device, option: str = "precision") -> torch.dtype:
    """`resolve_dtype` for scoring, where bf16 is an opt-in for speed: asked for on a CPU that
    would emulate it (no AMX or AVX512-BF16: slower than fp32, and less exact) it is an
    InputError naming `option`; `auto` resolves as `resolve_dtype` does."""
    if precision == "bf16" and device.type == "cpu" and not cpu_has_native_bf16():
        raise InputError(f"{option} 'bf16': this CPU has no native bf16 (AMX or AVX512-BF16), "
                         "so it would be emulated, slower than fp32: use fp32, or auto")
    return resolve_dtype(precision, device)


def resolve_compile(setting: Compile, device: torch.device, shapes_vary: bool = False) -> bool:
    """Whether a training loop runs its step through `torch.compile`: `auto` does on CUDA for a
    step of fixed shapes (pretraining), where the compiled step is faster, and not on the CPU,
    where it measured slower than eager. A step whose shapes vary by batch (`shapes_vary`:
    fine-tuning with each batch padded to its own longest example, `pad_to_multiple` 1) stays
    eager under `auto`: its dynamic-shape compile takes longer than most tasks' whole
    fine-tuning eagerly. With widths rounded to a few buckets (`pad_to_multiple: auto` on CUDA)
    the shapes are few and fixed, and `auto` compiles fine-tuning too.
    Measured: bench/results/findings.md ("Compiling on the CPU: slower than eager with dropout
    in the graph too"; "Fine-tuning on CUDA: eager under `compile: auto`")."""
    if setting == "auto":
        return device.type == "cuda" and not shapes_vary
    return setting


@dataclass(frozen=True)
class Placement:
    """Where a run computes: the device, and the dtype autocast computes in there."""

    device: torch.device
    dtype: torch.dtype

    def record(self, compiled: bool, processes: int = 1) -> dict[str, Any]:
        """Where a run placed here computed, as its metrics file records it (the report reads
        it: `gpt1.machine.compute_line`): the device type, the dtype, whether it ran through
        torch.compile, its data-parallel processes, and this machine."""
        return {"device": self.device.type, "dtype": str(self.dtype).removeprefix("torch."),
                "compiled": compiled, "processes": processes, "machine": machine()}


def placement(device: str | torch.device, precision: str) -> Placement:
    """The device `device` names (`resolve_device`), or `device` itself where it is resolved
    already (with several processes on CUDA, each one's own GPU: `Group.device`), and the dtype
    `precision` resolves to there, with the backends set up for that device
    (`configure_backends`)."""
    device = resolve_device(device) if isinstance(device, str) else device
    dtype = resolve_dtype(precision, device)
    configure_backends(device)
    return Placement(device, dtype)


def autocast(device: torch.device, dtype: torch.dtype) -> contextlib.AbstractContextManager:
    """Mixed precision for `dtype` below fp32, a no-op context otherwise."""
    if dtype == torch.float32:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


def configure_backends(device: torch.device) -> None:
    """TF32 matmuls on CUDA: fp32 accuracy is not needed where bf16 autocast already runs. On
    the CPU, freed memory kept for reuse rather than returned to the kernel (`keep_freed_memory`:
    each step's tensors would otherwise come back as fresh pages)."""
    if device.type == "cpu":
        keep_freed_memory()
    elif device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True


def to_device(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """`tensor` (on the host) copied to `device`; to CUDA from pinned memory without blocking, so
    the copy overlaps with the GPU work already queued instead of stalling the host."""
    if device.type == "cuda":
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor.to(device)
