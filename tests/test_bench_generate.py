"""`python -m bench.generate` at tiny sizes: it runs both sides, checks their greedy ids agree
and writes its table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from bench import generate

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_generate_bench_writes_its_table(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    path = generate.main(["--tiny", "--repeats", "1", "--out", str(tmp_path)])
    result = json.loads(path.read_text())
    # what the figures were measured on heads the printed tables, as torch names it
    capability = torch.backends.cpu.get_cpu_capability()
    assert result["machine"]["cpu_capability"] == capability
    printed = capsys.readouterr().out
    bf16 = " (native bf16)" if result["machine"]["native_bf16"] else ""
    assert f" with {capability} kernels{bf16}, {torch.get_num_threads()} torch threads" in \
        printed.split("\n## ")[0]
    assert path == tmp_path / "generate.json"
    (table,) = result["tables"]
    assert table["columns"] == ["model", "dtype", "new tokens/s", "ratio"]
    ours, hf = table["rows"]
    assert ours["model"].startswith("ours") and hf["model"].startswith("transformers")
    assert ours["new tokens/s"] > 0 and hf["new tokens/s"] > 0
    assert ours["ratio"] == pytest.approx(ours["new tokens/s"] / hf["new tokens/s"])
    assert ours["ratio"] > 0 and hf["ratio"] == 1.0
    settings = result["settings"]
    assert settings["greedy_ids_identical"] is True
    assert settings["distinct_ids"] > 3  # the text varies: agreeing on it says something
    assert len(settings["tokens_per_second"]["ours"]) == 1
    assert any("ratio >= 5x" in note for note in table["notes"])


def test_differing_greedy_ids_fail_the_bench() -> None:
    with pytest.raises(AssertionError, match="greedy ids differ"):
        generate.timed(lambda: [1, 2, 3], [1, 2, 4])
