"""gpt1.training.pretrain_loop: reproducible windows of the token stream, and a short run that
learns."""

from __future__ import annotations

import logging
import math
from pathlib import Path

import numpy as np
import pytest
import torch

import gpt1.training.pretrain_loop
from gpt1.config import PretrainParams
from gpt1.model.transformer import GPT1, GPT1Config
from gpt1.training.checkpoint import CheckpointStore
from gpt1.training.pretrain_loop import (
    PretrainResult,
    WindowSampler,
    evaluate,
    pretrain,
    steady_rate,
)
from tests.conftest import read_as_off_the_cpu

pytestmark = pytest.mark.usefixtures("one_torch_thread")

CTX = 8


def shards() -> list[np.ndarray]:
    # distinct, increasing values per shard: a window's origin and contiguity are visible
    return [np.arange(0, 100, dtype=np.uint16), np.arange(1000, 1003, dtype=np.uint16),
            np.arange(2000, 2050, dtype=np.uint32)]


def test_batch_is_deterministic() -> None:
    a = WindowSampler(shards(), CTX, seed=7, name="train")
    b = WindowSampler(shards(), CTX, seed=7, name="train")
    for i in (0, 1, 99):
        xa, ya = a.batch(i, 16)
        xb, yb = b.batch(i, 16)
        assert torch.equal(xa, xb) and torch.equal(ya, yb)
    assert not torch.equal(a.batch(0, 16)[0], a.batch(1, 16)[0])  # batches differ by index
    other = WindowSampler(shards(), CTX, seed=8, name="train")
    assert not torch.equal(a.batch(0, 16)[0], other.batch(0, 16)[0])  # and by seed
    # batch i does not depend on which batches were drawn before it
    fresh = WindowSampler(shards(), CTX, seed=7, name="train")
    assert torch.equal(fresh.batch(99, 16)[0], a.batch(99, 16)[0])


def test_targets_are_inputs_shifted_by_one() -> None:
    sampler = WindowSampler(shards(), CTX, seed=0, name="train")
    x, y = sampler.batch(3, 64)
    assert x.shape == y.shape == (64, CTX)
    assert x.dtype == y.dtype == torch.int64
    assert torch.equal(x[:, 1:], y[:, :-1])
    assert torch.equal(y - x, torch.ones_like(x))  # consecutive tokens of one shard
    starts = x[:, 0]
    in_first = (starts >= 0) & (starts <= 100 - CTX - 1)
    in_third = (starts >= 2000) & (starts <= 2050 - CTX - 1)
    assert bool((in_first | in_third).all())  # windows never cross a shard's end
    assert bool(in_first.any()) and bool(in_third.any())


def test_every_start_can_be_drawn() -> None:
    stream = np.arange(20, dtype=np.uint16)
    sampler = WindowSampler([stream], CTX, seed=0, name="train")
    starts = torch.cat([sampler.batch(i, 64)[0][:, 0] for i in range(10)])
    assert set(starts.tolist()) == set(range(20 - CTX))  # 0 .. len - n_ctx - 1


def test_too_short_split_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"the val split .* n_ctx \+ 1 = 9"):
        WindowSampler([np.arange(8), np.arange(5)], CTX, seed=0, name="val")


def _cfg(**changes: object) -> PretrainParams:
    base = dict(seed=0, device="cpu", precision="fp32", batch_size=8, max_steps=30, lr=3e-3,
                warmup_steps=3, schedule="cosine", weight_decay=0.01, grad_clip=1.0,
                eval_every=10, eval_batches=2, log_every=10, checkpoint_every=10,
                keep_checkpoints=2, peak_tflops=1.0)
    return PretrainParams(**{**base, **changes})


def _model(vocab: int) -> GPT1:
    torch.manual_seed(0)
    return GPT1(GPT1Config(vocab_size=vocab, n_ctx=CTX, n_embd=32, n_layer=2, n_head=2,
                           embd_pdrop=0.0, attn_pdrop=0.0, resid_pdrop=0.0))


def test_thirty_steps_lower_the_loss() -> None:
    vocab = 16
    pattern = np.array([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7], dtype=np.uint16)
    train = [np.tile(pattern, 40)]
    val = [np.tile(pattern, 5)]
    model = _model(vocab)
    seen: list[tuple[int, dict[str, float]]] = []
    result = pretrain(model, train, val, _cfg(lr=1e-2),
                      lambda step, values: seen.append((step, values)))
    assert isinstance(result, PretrainResult)
    assert [s for s, _ in seen] == list(range(1, 31))
    losses = [v["train/loss"] for _, v in seen]
    assert losses[0] > math.log(vocab) - 0.5  # it starts near chance
    assert losses[-1] < 0.5 * losses[0]
    assert [s for s, v in seen if "val/loss" in v] == [10, 20, 30]
    assert result.val_loss < 0.5 * math.log(vocab)
    assert result.val_perplexity == pytest.approx(math.exp(result.val_loss))
    assert result.steps == 30 and result.tokens == 30 * 8 * CTX
    assert seen[-1][1]["lr"] == pytest.approx(0.0, abs=1e-9)  # cosine decayed to zero
    assert max(v["lr"] for _, v in seen) == pytest.approx(1e-2)
    assert model.training  # left as it was trained


def test_losses_read_at_log_steps_give_the_same_run(monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path,
                                                    loss_reads: list[int]) -> None:
    """Off the CPU the losses are read every log_every steps (and at each evaluation and
    checkpoint): the curves, the checkpoints and the weights are those of a run that reads them
    every step. Here the CPU is made to read as a GPU does."""
    train = [np.arange(300, dtype=np.uint16) % 13]
    val = [np.arange(60, dtype=np.uint16) % 13]
    runs = {}
    for read_every in ("every step", "log steps"):
        if read_every == "log steps":
            read_as_off_the_cpu(monkeypatch, gpt1.training.pretrain_loop)
        loss_reads.clear()
        model, seen = _model(13), []
        store = CheckpointStore(tmp_path / read_every.replace(" ", "-"), "run")
        result = pretrain(model, train, val, _cfg(max_steps=23, log_every=4, eval_every=6),
                          lambda step, values, seen=seen: seen.append((step, values)), store)
        runs[read_every] = (seen, list(loss_reads), model, result, store.latest())
    (every, every_reads, a, ra, ckpt_a), (logged, log_reads, b, rb, ckpt_b) = runs.values()
    assert every_reads == list(range(1, 24))
    assert log_reads == [1, 4, 6, 8, 10, 12, 16, 18, 20, 23]  # log steps, evaluations, checkpoints
    assert logged == every
    assert rb.train_loss == ra.train_loss and rb.val_loss == ra.val_loss
    for pa_, pb_ in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(pa_, pb_)
    assert ckpt_b["step"] == ckpt_a["step"] == 23
    assert ckpt_b["smoothed_loss"] == ckpt_a["smoothed_loss"]
    for name, series in ckpt_a["history"].items():
        assert torch.equal(ckpt_b["history"][name], series)


def test_pretrain_is_reproducible() -> None:
    train = [np.arange(200, dtype=np.uint16) % 13]
    val = [np.arange(60, dtype=np.uint16) % 13]
    a, b = _model(13), _model(13)
    ra = pretrain(a, train, val, _cfg(max_steps=5, eval_every=5))
    rb = pretrain(b, train, val, _cfg(max_steps=5, eval_every=5))
    assert ra.train_loss == rb.train_loss and ra.val_loss == rb.val_loss
    for pa_, pb_ in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(pa_, pb_)


def test_a_compiled_run_follows_the_eager_one(caplog: pytest.LogCaptureFixture) -> None:
    """torch.compile changes how the step computes, not what: the same losses, to rounding.
    (bench.train_step's tiny model and batch, whose compiled step its test compiles too: a
    worker that ran one finds the other's kernels in inductor's cache.)"""
    tokens = np.random.default_rng(0).integers(0, 256, 400).astype(np.uint16)
    curves: dict[bool, list[float]] = {False: [], True: []}
    results = {}
    for compiled in (False, True):
        torch.manual_seed(0)
        model = GPT1(GPT1Config(vocab_size=256, n_ctx=32, n_embd=64, n_layer=2, n_head=2,
                                embd_pdrop=0.0, attn_pdrop=0.0, resid_pdrop=0.0))
        with caplog.at_level(logging.INFO, logger="gpt1.training.pretrain_loop"):
            results[compiled] = pretrain(
                model, [tokens], [tokens],
                _cfg(batch_size=4, max_steps=4, eval_every=4, compile=compiled),
                lambda step, values, c=compiled: curves[c].append(values["train/loss"]))
    assert curves[True] == pytest.approx(curves[False], rel=1e-4)
    assert results[True].val_loss == pytest.approx(results[False].val_loss, rel=1e-4)
    assert "first step in" in caplog.text and "(compiling it)" in caplog.text
    # the compilation is the first step's: the rate is the other three's
    compiled = results[True]
    assert compiled.startup_steps == 1 and 0 < compiled.startup_seconds < compiled.seconds
    assert compiled.tokens_per_second == pytest.approx(
        3 * 4 * 32 / (compiled.seconds - compiled.startup_seconds))


def test_steady_rate_leaves_out_the_first_steps() -> None:
    assert steady_rate(10, 14.0, 2, 6.0) == 1.0  # 8 steps in 8 s after two 3 s first steps
    assert steady_rate(1, 5.0, 1, 5.0) == 0.2  # nothing after the first step: all of it


def test_evaluate_is_repeatable_and_restores_mode() -> None:
    model = _model(13).train()
    sampler = WindowSampler([np.arange(100, dtype=np.uint16) % 13], CTX, seed=1, name="val")
    cpu = torch.device("cpu")
    first = evaluate(model, sampler, 3, 4, cpu, torch.float32)
    assert model.training
    assert evaluate(model, sampler, 3, 4, cpu, torch.float32) == first
    assert first == pytest.approx(math.log(13), abs=0.5)


def test_evaluate_is_the_mean_batch_loss_read_from_the_device_once(
        device_reads: list[str]) -> None:
    """A read (`item`, `tolist`) makes the host wait for a GPU: one per evaluation, not one per
    batch."""
    model = _model(13).eval()
    sampler = WindowSampler([np.arange(100, dtype=np.uint16) % 13], CTX, seed=1, name="val")
    with torch.no_grad():
        expected = np.mean([torch.nn.functional.cross_entropy(
            (model(x) @ model.tokens_embed.weight.T).flatten(0, 1), y.flatten()).item()
            for x, y in (sampler.batch(i, 4) for i in range(3))])
    device_reads.clear()
    loss = evaluate(model, sampler, 3, 4, torch.device("cpu"), torch.float32)
    assert device_reads == ["tolist"]
    assert loss == pytest.approx(expected, rel=1e-6)
