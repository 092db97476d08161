"""bench.profiling: a profiled training step's ops land in the category their name or region
says, and the categories add up to the step."""

from __future__ import annotations

import time

import pytest
import torch
from torch.profiler import record_function

from bench.profiling import CATEGORIES, OUTSIDE, breakdown, category, step_profiler
from gpt1.model.transformer import GPT1, GPT1Config

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_a_step_breaks_down_by_what_each_op_does() -> None:
    torch.manual_seed(0)
    model = GPT1(GPT1Config(vocab_size=300, n_ctx=16, n_embd=32, n_layer=2, n_head=2)).train()
    optimizer = torch.optim.AdamW(model.parameters())
    profiler = step_profiler(torch.device("cpu"))
    profiler.start()
    started = time.perf_counter()
    with record_function("data"):
        x = torch.randint(0, 300, (4, 16))
    loss = model.lm_loss(x, x)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    with record_function("optimizer"):
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
    seconds = time.perf_counter() - started
    profiler.stop()
    events = profiler.events()

    def kinds(name: str) -> set[str]:
        return {category(e) for e in events if e.name == name}

    assert kinds("data") == {"data"}
    assert {category(e) for e in events if e.cpu_parent and e.cpu_parent.name == "data"} == {"data"}
    assert kinds("aten::addmm") == {"matmul"}  # the block's projections
    assert kinds("aten::native_layer_norm") == {"LayerNorm/GELU/dropout/element-wise"}
    assert kinds("aten::native_layer_norm_backward") == {"LayerNorm/GELU/dropout/element-wise"}
    assert kinds("aten::gelu") == {"LayerNorm/GELU/dropout/element-wise"}
    assert kinds("aten::_softmax") == {"attention"}  # the CPU path with attention dropout
    assert kinds("aten::exp_") == {"loss"}  # inside the chunked loss
    assert "matmul" in kinds("aten::mm")  # the LM head's, inside the chunked loss too
    assert kinds("aten::_foreach_norm") == {"optimizer"}  # gradient clipping
    assert kinds("aten::addcdiv_") <= {"optimizer"}
    assert kinds("dropout mask") == {"LayerNorm/GELU/dropout/element-wise"}

    ms = breakdown(events, seconds, 1, torch.device("cpu"))
    assert list(ms) == CATEGORIES
    assert sum(ms.values()) == pytest.approx(seconds * 1e3)
    assert ms["matmul"] > 0 and ms["optimizer"] > 0 and ms["data"] > 0 and ms[OUTSIDE] >= 0
