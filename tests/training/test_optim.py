"""gpt1.training.optim: AdamW with decay on matrices only, and the warmup + decay learning-rate
factor."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from gpt1.model.transformer import GPT1, GPT1Config
from gpt1.training.optim import build_optimizer, build_scheduler, lr_factor

CPU = torch.device("cpu")


@pytest.fixture()
def model() -> GPT1:
    torch.manual_seed(0)
    return GPT1(GPT1Config(vocab_size=40, n_ctx=8, n_embd=16, n_layer=2, n_head=2))


def test_weight_decay_only_on_matrices(model: GPT1) -> None:
    opt = build_optimizer(model, lr=1e-3, weight_decay=0.1, device=CPU)
    decayed, plain = opt.param_groups
    assert decayed["weight_decay"] == 0.1 and plain["weight_decay"] == 0.0
    assert all(p.dim() > 1 for p in decayed["params"])
    assert all(p.dim() <= 1 for p in plain["params"])
    by_id = {id(p): n for n, p in model.named_parameters()}
    names_decayed = {by_id[id(p)] for p in decayed["params"]}
    names_plain = {by_id[id(p)] for p in plain["params"]}
    assert names_decayed | names_plain == set(by_id.values())  # every parameter, once
    assert not names_decayed & names_plain
    assert {"tokens_embed.weight", "positions_embed.weight",
            "h.0.attn.c_attn.weight"} <= names_decayed
    assert {"h.0.ln_1.weight", "h.0.ln_1.bias", "h.0.attn.c_attn.bias"} <= names_plain
    assert opt.defaults["lr"] == 1e-3
    assert opt.defaults["fused"]  # one kernel for the whole update, on the CPU as on CUDA


def test_decay_step_shrinks_matrices_only(model: GPT1) -> None:
    lr, wd = 0.1, 0.5
    opt = build_optimizer(model, lr=lr, weight_decay=wd, device=CPU)
    with torch.no_grad():  # non-zero gains and biases, so a wrong decay would show
        for p in model.parameters():
            if p.dim() == 1:
                p.fill_(0.3)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    for p in model.parameters():
        p.grad = torch.zeros_like(p)  # no gradient: only the decay moves anything
    opt.step()
    for n, p in model.named_parameters():
        if p.dim() > 1:
            torch.testing.assert_close(p.detach(), before[n] * (1 - lr * wd))
        else:
            torch.testing.assert_close(p.detach(), before[n], rtol=0, atol=0)


def test_frozen_parameters_are_left_out(model: GPT1) -> None:
    model.tokens_embed.weight.requires_grad_(False)
    opt = build_optimizer(model, lr=1e-3, weight_decay=0.1, device=CPU)
    assert all(p is not model.tokens_embed.weight for g in opt.param_groups
               for p in g["params"])


@pytest.mark.parametrize("schedule", ["cosine", "linear"])
def test_warmup_is_linear_to_the_peak(schedule: str) -> None:
    warmup, total = 10, 110
    assert [lr_factor(s, warmup, total, schedule) for s in range(warmup)] == pytest.approx(
        [(s + 1) / warmup for s in range(warmup)])
    assert lr_factor(warmup, warmup, total, schedule) == pytest.approx(1.0)
    assert lr_factor(total, warmup, total, schedule) == pytest.approx(0.0, abs=1e-12)
    assert lr_factor(total + 50, warmup, total, schedule) == pytest.approx(0.0, abs=1e-12)
    decay = [lr_factor(s, warmup, total, schedule) for s in range(warmup, total + 1)]
    assert all(a >= b for a, b in itertools.pairwise(decay))  # monotone decay


def test_cosine_and_linear_shapes() -> None:
    warmup, total = 10, 110
    mid = warmup + (total - warmup) // 2
    assert lr_factor(mid, warmup, total, "cosine") == pytest.approx(0.5)
    assert lr_factor(mid, warmup, total, "linear") == pytest.approx(0.5)
    quarter = warmup + (total - warmup) // 4
    assert lr_factor(quarter, warmup, total, "cosine") == pytest.approx(
        0.5 * (1 + math.cos(math.pi / 4)))
    assert lr_factor(quarter, warmup, total, "linear") == pytest.approx(0.75)


def test_no_warmup() -> None:
    assert lr_factor(0, 0, 100, "cosine") == 1.0
    assert lr_factor(50, 0, 100, "linear") == pytest.approx(0.5)


def test_unknown_schedule() -> None:
    with pytest.raises(ValueError, match="unknown schedule 'step'"):
        lr_factor(50, 10, 100, "step")


def test_scheduler_drives_the_optimizer(model: GPT1) -> None:
    peak, warmup, total = 0.01, 4, 20
    opt = build_optimizer(model, lr=peak, weight_decay=0.0, device=CPU)
    sched = build_scheduler(opt, warmup, total, "linear")
    seen = []
    for _ in range(total):
        seen.append(opt.param_groups[0]["lr"])
        assert opt.param_groups[1]["lr"] == seen[-1]  # both groups follow the schedule
        opt.step()
        sched.step()
    assert seen == pytest.approx([peak * lr_factor(s, warmup, total, "linear")
                                  for s in range(total)])
    assert max(seen) == pytest.approx(peak)
    assert opt.param_groups[0]["lr"] == pytest.approx(0.0, abs=1e-12)
