"""gpt1.training.allocator: memory freed by one step is reused by the next, not mapped afresh
(counted in page faults, in fresh processes: the setting lasts a process's life)."""

from __future__ import annotations

import json
import platform
import subprocess
import sys

import pytest

from gpt1.training import allocator
from tests.conftest import skip_outside_ci

# A step's shape: a dozen tensors of 1 to 24 MB alive at once, freed in another order; the
# same sizes again each round.
ROUNDS = """
import json, random, resource, sys, torch
from gpt1.training.allocator import keep_freed_memory
kept = keep_freed_memory() if sys.argv[1] == "keep" else None
rng = random.Random(0)
sizes = [rng.randint(1, 24) * 2**18 for _ in range(12)]  # float32s
counts = []
for _ in range(6):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    blocks = [torch.ones(n) for n in sizes]
    for i in rng.sample(range(len(blocks)), len(blocks)):
        blocks[i] = None
    counts.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(json.dumps({"kept": kept, "faults": counts, "pages": sum(sizes) * 4 // 4096}))
"""


def _faults(mode: str) -> dict:
    out = subprocess.run([sys.executable, "-c", ROUNDS, mode], check=True, capture_output=True,
                         text=True)
    return json.loads(out.stdout)


def test_freed_blocks_are_reused_not_faulted_in_again() -> None:
    if platform.libc_ver()[0] != "glibc":
        skip_outside_ci("glibc's malloc only (CI runs on glibc)")
    default, kept = _faults("default"), _faults("keep")
    assert kept["kept"] is True
    pages = default["pages"]
    # glibc's defaults: the first round's blocks are mapped and unmapped, so the second round's
    # come from fresh memory again (later rounds vary from run to run as its thresholds adapt)
    assert default["faults"][1] > pages // 2, default
    # kept: once the heap has grown, the blocks come back from it (a few pages to fragmentation)
    assert sum(kept["faults"][1:]) < pages // 2, kept


def test_other_c_libraries_are_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(platform, "libc_ver", lambda: ("", ""))
    assert allocator.keep_freed_memory.__wrapped__() is False
