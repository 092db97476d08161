"""Where a run computed, as a metrics file records it (`Placement.record`): two machines and the
record of a run on one, for the report's tests (gpt1.reporting.facts, gpt1.jobs.report)."""

from __future__ import annotations

LAPTOP = {"python": "3.11.2", "torch": "2.9.0", "cpu": "x86_64", "cpu_capability": "AVX2",
          "threads": 2}
GPU_NODE = {"python": "3.12.3", "torch": "2.11.0+cu130", "cpu": "x86_64",
            "cpu_capability": "AVX512", "native_bf16": True, "threads": 16, "gpu": "NVIDIA H200"}


def trained(machine: dict, device: str = "cpu", dtype: str = "float32", compiled: bool = False,
            processes: int = 1) -> dict:
    """A metrics file's record of where its run computed, as `Placement.record` writes it."""
    return {"device": device, "dtype": dtype, "compiled": compiled, "processes": processes,
            "machine": machine}
