"""`python -m bench.train_step` at tiny sizes: it runs both sides and writes its table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import train_step

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_train_step_bench_writes_its_table(tmp_path: Path) -> None:
    path = train_step.main(["--tiny", "--repeats", "1", "--steps", "2", "--warmup", "1",
                            "--curve-steps", "4", "--out", str(tmp_path)])
    result = json.loads(path.read_text())
    assert path == tmp_path / "train_step.json"
    (table, curve) = result["tables"]
    ours, hf = table["rows"]
    assert ours["model"] == "ours" and hf["model"].startswith("transformers")
    assert ours["tokens/s"] > 0 and hf["tokens/s"] > 0
    assert ours["ratio"] == pytest.approx(ours["tokens/s"] / hf["tokens/s"])
    assert ours["MFU %"] > 0
    curves = result["settings"]["curves"]
    assert len(curves["fp32"]) == len(curves["bf16"]) == 4
    # bf16 autocast starts from the same weights and batch: the first losses nearly agree
    first = curve["rows"][0]
    assert first["step"] == 1
    assert first["bf16 loss"] == pytest.approx(first["fp32 loss"], rel=0.02)


def test_curve_gap_is_relative_to_fp32() -> None:
    curves = {"fp32": [9.0, 4.0, 2.0], "bf16": [9.0, 4.0, 2.02]}
    assert train_step.curve_gap(curves, window=1) == pytest.approx(0.01)
    assert train_step.curve_gap(curves, window=2) == pytest.approx(0.02 / 6)


def test_no_curve_where_bf16_is_emulated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("gpt1.training.device.cpu_has_native_bf16", lambda: False)
    path = train_step.main(["--tiny", "--repeats", "1", "--steps", "1", "--warmup", "1",
                            "--out", str(tmp_path)])
    (table,) = json.loads(path.read_text())["tables"]
    assert table["rows"][0]["dtype"] == "float32"
    assert any("no bf16 loss curve" in note for note in table["notes"])
