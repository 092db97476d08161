"""`make bench` runs every benchmark: the Makefile's BENCHES names each runnable bench module."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# runnable modules of bench/ that measure nothing, so no benchmark of `make bench`
# the docs page; the README's two commands, timed; the GPU check, run from a bundle on a GPU
# machine, and the wheels it needs there; the compiled step's candidate changes, on a GPU
NOT_BENCHMARKS = {"pages", "quickstart", "device_check", "device_wheels", "step_variants"}


def test_make_bench_runs_every_benchmark() -> None:
    listed = re.search(r"^BENCHES := (.*)$", (REPO / "Makefile").read_text(), re.M)
    assert listed is not None, "no BENCHES line in the Makefile"
    runnable = {p.stem for p in (REPO / "bench").glob("*.py")
                if 'if __name__ == "__main__":' in p.read_text()} - NOT_BENCHMARKS
    assert set(listed.group(1).split()) == runnable


def test_the_benchmarks_read_the_real_data_where_the_tests_do(tmp_path: Path) -> None:
    """../shared/data beside the checkout, or GPT1_SHARED_DATA: a clone elsewhere finds it."""
    code = "from bench.common import DATA; print(DATA)"
    env = {k: v for k, v in os.environ.items() if k != "GPT1_SHARED_DATA"}
    beside = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True,
                            text=True, check=True).stdout.strip()
    assert Path(beside) == REPO.parent / "shared" / "data"
    named = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                           text=True, check=True, env={**env, "GPT1_SHARED_DATA": str(tmp_path)})
    assert Path(named.stdout.strip()) == tmp_path
