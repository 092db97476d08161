"""What a run or a measurement ran on: the CPU and torch's kernel capability on it, the threads,
the GPU; figures compare only with figures of the same capability."""

from __future__ import annotations

import platform
from typing import Any

# what a run computed in, by torch's name for the dtype autocast computed in
PRECISION_NAMES = {"float32": "fp32", "bfloat16": "bf16 autocast", "float16": "fp16 autocast"}


def cpu_has_native_bf16() -> bool:
    """Whether this CPU multiplies bf16 matrices in hardware (AMX tiles or AVX512-BF16); on
    others, oneDNN emulates bf16 and it is slower than fp32."""
    import torch  # imported here, as in `machine`

    return cpu_has_amx() or bool(getattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)())


def cpu_has_amx() -> bool:
    """Whether this CPU has AMX tiles, the one CPU hardware where bf16 autocast trains faster
    than fp32: AVX512-BF16 alone computes bf16 natively yet measured slower than fp32
    (bench/results/findings.md, "bf16 autocast on a CPU without AMX")."""
    import torch

    return bool(getattr(torch.cpu, "_is_amx_tile_supported", lambda: False)())


def machine() -> dict[str, Any]:
    """This machine as the benchmarks and the training runs' metrics files describe it."""
    # imported here: the report formats the recorded facts (`compute_line`) without torch,
    # which would add seconds of import to its stage
    import torch

    info: dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__,
                            "cpu": platform.processor() or platform.machine(),
                            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
                            "native_bf16": cpu_has_native_bf16(), "amx": cpu_has_amx(),
                            "threads": torch.get_num_threads()}
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name()
    return info


def machine_line(info: dict[str, Any]) -> str:
    """`info` (from `machine`) in one line."""
    gpu = f", GPU {info['gpu']}" if "gpu" in info else ""
    # recorded since the quick start is sized for CPUs without it; older results lack the key
    bf16 = (" (native bf16, AMX)" if info.get("amx") else
            " (native bf16)" if info.get("native_bf16") else "")
    return (f"machine: CPU {info['cpu']} with {info['cpu_capability']} kernels{bf16}, "
            f"{info['threads']} torch thread{'s' if info['threads'] != 1 else ''}{gpu}; "
            f"torch {info['torch']}, Python {info['python']}")


def placement_line(record: dict[str, Any]) -> str:
    """How a training run computed, from its record (`gpt1.training.device.Placement.record`):
    device, processes, precision, compilation."""
    processes = record["processes"]
    where = record["device"] + (f" x {processes} processes" if processes > 1 else "")
    precision = PRECISION_NAMES.get(record["dtype"], record["dtype"])
    return f"{where}, {precision}" + (", compiled" if record["compiled"] else "")


def compute_line(record: dict[str, Any]) -> str:
    """`placement_line`, then the machine the run computed on."""
    return (f"{placement_line(record)}; "
            f"{machine_line(record['machine']).removeprefix('machine: ')}")
