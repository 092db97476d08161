"""What a run or a measurement ran on: the CPU and torch's kernel capability on it, the threads,
the GPU; figures compare only with figures of the same capability."""

from __future__ import annotations

import platform
from typing import Any

import torch

from gpt1.training.device import cpu_has_native_bf16


def machine() -> dict[str, Any]:
    """This machine as the benchmarks and the report describe it."""
    info: dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__,
                            "cpu": platform.processor() or platform.machine(),
                            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
                            "native_bf16": cpu_has_native_bf16(),
                            "threads": torch.get_num_threads()}
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name()
    return info


def machine_line(info: dict[str, Any]) -> str:
    """`info` (from `machine`) in one line."""
    gpu = f", GPU {info['gpu']}" if "gpu" in info else ""
    # recorded since the quick start is sized for CPUs without it; older results lack the key
    bf16 = " (native bf16)" if info.get("native_bf16") else ""
    return (f"machine: CPU {info['cpu']} with {info['cpu_capability']} kernels{bf16}, "
            f"{info['threads']} torch threads{gpu}; torch {info['torch']}, "
            f"Python {info['python']}")
