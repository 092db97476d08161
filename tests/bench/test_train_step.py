"""`python -m bench.train_step` at tiny sizes: it runs every side and writes its table."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

import gpt1.training.pretrain_loop
from bench import train_step
from tests.conftest import read_as_off_the_cpu

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_train_step_bench_writes_its_table(tmp_path: Path) -> None:
    path = train_step.main(["--tiny", "--repeats", "1", "--steps", "2", "--warmup", "1",
                            "--curve-steps", "4", "--profile", "--out", str(tmp_path)])
    result = json.loads(path.read_text())
    assert path == tmp_path / "train_step.json"
    (table, profiled, curve) = result["tables"]
    rows = {row["model"]: row for row in table["rows"]}
    ours = rows.pop("ours")
    assert "transformers float32" in rows
    assert ours["tokens/s"] > 0 and all(row["tokens/s"] > 0 for row in rows.values())
    fastest = max(row["tokens/s"] for row in rows.values())
    assert ours["ratio"] == pytest.approx(ours["tokens/s"] / fastest)
    assert max(row["ratio"] for row in rows.values()) == pytest.approx(1.0)
    assert ours["MFU %"] > 0
    # each side's categories add up to its profiled step
    step = profiled["rows"][-1]
    assert step["category"] == "step"
    for side in ["ours", *rows]:
        shares = [row[f"{side} %"] for row in profiled["rows"][:-1]]
        assert sum(shares) == pytest.approx(100.0)
        assert step[f"{side} ms"] > 0
    # and each side's costliest ops as torch.profiler lists them, its step's matmuls among them
    top_ops = result["settings"]["profile_top_ops"]
    assert sorted(top_ops) == sorted(["ours", *rows])
    assert all("Self CPU" in text and "aten::" in text for text in top_ops.values())
    curves = result["settings"]["curves"]
    assert len(curves["fp32"]) == len(curves["bf16"]) == 4
    # bf16 autocast starts from the same weights and batch: the first losses nearly agree
    first = curve["rows"][0]
    assert first["step"] == 1
    assert first["bf16 loss"] == pytest.approx(first["fp32 loss"], rel=0.02)


def test_the_reference_runs_in_bf16_where_the_policy_trains_in_bf16(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("gpt1.training.device.cpu_has_amx", lambda: True)
    # this CPU may emulate bf16, where one peak-sized matmul takes many seconds: rows, not
    # figures, are what this checks
    monkeypatch.setattr(train_step, "measure_peak_flops", lambda *_: 1e11)
    path = train_step.main(["--tiny", "--repeats", "1", "--steps", "1", "--warmup", "1",
                            "--curve-steps", "0", "--out", str(tmp_path)])
    (table,) = json.loads(path.read_text())["tables"]
    dtypes = {row["model"]: row["dtype"] for row in table["rows"]}
    assert dtypes == {"ours": "bfloat16", "transformers float32": "float32",
                      "transformers bfloat16": "bfloat16"}


def test_compile_adds_the_compiled_sides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ours eager and compiled against transformers in fp32 and compiled, in one run, each side
    also profiled; the warm-up covers compilation."""
    monkeypatch.setattr("gpt1.training.device.cpu_has_amx", lambda: False)
    monkeypatch.setattr(train_step, "measure_peak_flops", lambda *_: 1e11)
    # the model of test_pretrain's compiled run (no dropout, which it compares with eager): a
    # worker that ran one finds the other's kernels in inductor's cache
    monkeypatch.setitem(train_step.TINY_MODEL, "dropout", 0.0)
    path = train_step.main(["--tiny", "--compile", "--repeats", "1", "--steps", "1",
                            "--warmup", "1", "--curve-steps", "0", "--profile",
                            "--out", str(tmp_path)])
    result = json.loads(path.read_text())
    assert result["settings"]["warmup"] == 2
    table, profiled = result["tables"]
    rows = {row["model"]: row for row in table["rows"]}
    assert list(rows) == ["ours", "ours compiled", "transformers float32",
                          "transformers float32 compiled"]
    for row in rows.values():
        assert math.isfinite(row["tokens/s"]) and row["tokens/s"] > 0
        assert row["dtype"] == "float32"
    fastest = max(rows["transformers float32"]["tokens/s"],
                  rows["transformers float32 compiled"]["tokens/s"])
    assert rows["ours compiled"]["ratio"] == pytest.approx(
        rows["ours compiled"]["tokens/s"] / fastest)
    assert all(profiled["rows"][-1][f"{side} ms"] > 0 for side in rows)


def test_compiled_sides_run_in_the_policy_dtype() -> None:
    setup = train_step.make_setup(None, "cpu", "bf16", tiny=True, steps=1, warmup=0,
                                  compiled=True)
    runs = train_step.sides(setup, torch.bfloat16)
    assert {name: (side.dtype, side.reference) for name, side in runs.items()} == {
        "ours": (torch.bfloat16, False), "ours compiled": (torch.bfloat16, False),
        "transformers float32": (torch.float32, True),
        "transformers bfloat16": (torch.bfloat16, True),
        "transformers bfloat16 compiled": (torch.bfloat16, True)}
    assert setup.warmup == 2 and not setup.train.compile


def test_curve_gap_is_relative_to_fp32() -> None:
    curves = {"fp32": [9.0, 4.0, 2.0], "bf16": [9.0, 4.0, 2.02]}
    assert train_step.curve_gap(curves, window=1) == pytest.approx(0.01)
    assert train_step.curve_gap(curves, window=2) == pytest.approx(0.02 / 6)


def test_no_curve_where_the_policy_trains_in_fp32(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("gpt1.training.device.cpu_has_amx", lambda: False)
    path = train_step.main(["--tiny", "--repeats", "1", "--steps", "1", "--warmup", "1",
                            "--out", str(tmp_path)])
    (table,) = json.loads(path.read_text())["tables"]
    assert [row["dtype"] for row in table["rows"]] == ["float32", "float32"]
    assert any("no bf16 loss curve" in note for note in table["notes"])


def test_a_run_cut_short_in_its_profile_keeps_its_timing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The timing table is written before the profile starts (on a GPU the profile takes
    minutes): a run stopped there by a lease's time limit keeps it."""
    monkeypatch.setattr(train_step, "measure_peak_flops", lambda *_: 1e11)

    def stopped(*args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(train_step, "profile_table", stopped)
    with pytest.raises(KeyboardInterrupt):
        train_step.main(["--tiny", "--repeats", "1", "--steps", "1", "--warmup", "1",
                         "--curve-steps", "0", "--profile", "--out", str(tmp_path)])
    (table,) = json.loads((tmp_path / "train_step.json").read_text())["tables"]
    assert table["name"] == "train_step"
    assert {row["model"] for row in table["rows"]} >= {"ours", "transformers float32"}


@pytest.mark.parametrize(("warmup", "steps"), [(3, 10), (5, 10), (4, 6)])
def test_the_clock_stops_where_the_loop_reads_its_losses(
        monkeypatch: pytest.MonkeyPatch, loss_reads: list[int], warmup: int,
        steps: int) -> None:
    """Off the CPU the loop reads its losses every log_every steps: the setup has it read at
    the warm-up's last step and the last timed one, where the clock starts and stops."""
    read_as_off_the_cpu(monkeypatch, gpt1.training.pretrain_loop)  # the CPU reading as a GPU does
    setup = train_step.make_setup(None, "cpu", "fp32", tiny=True, steps=steps, warmup=warmup)
    clock = train_step.ours(setup)
    assert {warmup, warmup + steps} <= set(loss_reads)
    assert clock.seconds > 0 and len(clock.losses) == warmup + steps + 1
    if math.gcd(warmup, steps) > 1:
        assert len(loss_reads) < warmup + steps + 1  # not every step


def test_each_side_runs_once_untimed_before_rounds_that_rotate(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def side(name: str, seconds: float) -> train_step.Side:
        def run(clock: train_step.StepClock | None) -> train_step.StepClock:
            calls.append(name)
            done = train_step.StepClock(0, 1)
            # the untimed run is the slow one: none of the medians may see it
            done.started, done.finished = 0.0, seconds * (10 if calls.count(name) == 1 else 1)
            return done
        return train_step.Side(run, torch.float32, reference=name != "ours")

    monkeypatch.setattr(train_step, "sides", lambda setup, dtype: {
        "ours": side("ours", 1.0), "transformers float32": side("transformers float32", 2.0)})
    monkeypatch.setattr(train_step, "measure_peak_flops", lambda *_: 1e11)
    setup = train_step.make_setup(None, "cpu", "fp32", tiny=True, steps=1, warmup=1)
    (table,), result = train_step.run(setup, 3, curve_steps=0)
    ours, theirs = "ours", "transformers float32"
    assert calls == [ours, theirs, ours, theirs, theirs, ours, ours, theirs]
    per_run = setup.steps * setup.tokens_per_step
    assert result["tokens_per_second"] == {ours: [per_run / 1.0] * 3, theirs: [per_run / 2.0] * 3}
    assert table.notes[0].startswith("median of 3 alternating repetitions (after an untimed")
