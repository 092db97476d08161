"""`make bench` runs every benchmark: the Makefile's BENCHES names each runnable bench module."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
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
