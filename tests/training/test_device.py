"""gpt1.training.device: device and precision resolution (CPU-only checks, no GPU assumed)."""

from __future__ import annotations

import contextlib

import pytest
import torch

import gpt1.training.device
from gpt1.training.device import (
    Placement,
    autocast,
    placement,
    resolve_compile,
    resolve_device,
    resolve_dtype,
)
from gpt1.training.distributed import Group


def test_resolve_device() -> None:
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected
    assert resolve_device("cpu") == torch.device("cpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            resolve_device("cuda:0")


def test_resolve_dtype(monkeypatch: pytest.MonkeyPatch) -> None:
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    # auto: bf16 on a CPU with AMX only; AVX512-BF16 alone (native bf16) stays fp32
    monkeypatch.setattr(gpt1.training.device, "cpu_has_native_bf16", lambda: True)
    for amx, expected in ((False, torch.float32), (True, torch.bfloat16)):
        monkeypatch.setattr(gpt1.training.device, "cpu_has_amx", lambda amx=amx: amx)
        assert resolve_dtype("auto", cpu) == expected
    assert resolve_dtype("auto", cuda) == torch.bfloat16
    assert resolve_dtype("fp32", cuda) == torch.float32
    assert resolve_dtype("bf16", cpu) == torch.bfloat16


def test_auto_compiles_fixed_shapes_on_cuda_only() -> None:
    cpu, cuda = torch.device("cpu"), torch.device("cuda:1")
    assert resolve_compile("auto", cuda) and not resolve_compile("auto", cpu)
    assert not resolve_compile("auto", cuda, shapes_vary=True)
    assert resolve_compile(True, cpu) and not resolve_compile(False, cuda)
    assert resolve_compile(True, cuda, shapes_vary=True)


def test_placement_pairs_the_device_with_its_dtype(monkeypatch: pytest.MonkeyPatch) -> None:
    cpu = torch.device("cpu")
    assert placement("cpu", "fp32") == Placement(cpu, torch.float32)
    assert placement("cpu", "bf16") == Placement(cpu, torch.bfloat16)
    monkeypatch.setattr(gpt1.training.device, "cpu_has_amx", lambda: False)
    assert placement("cpu", "auto") == Placement(cpu, torch.float32)
    # a group places each process; on the CPU, all of them on the one device
    assert placement(Group(rank=1, world_size=2, local_rank=1).device("cpu"), "fp32").device == cpu


def test_autocast() -> None:
    cpu = torch.device("cpu")
    assert isinstance(autocast(cpu, torch.float32), contextlib.nullcontext)
    a = torch.randn(4, 4)
    with autocast(cpu, torch.bfloat16):
        assert (a @ a).dtype == torch.bfloat16
    assert (a @ a).dtype == torch.float32
