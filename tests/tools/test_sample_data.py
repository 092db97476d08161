"""`python -m tools.sample_data` regenerates the bundled sample byte for byte: the files in
gpt1/sample_data/ are what the generator writes, nothing more or less (their hashes feed
dvc.lock, so the bundled files must not drift from their generator, nor it from them)."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from tests.conftest import REPO, run

SAMPLE = REPO / "gpt1" / "sample_data"


def _hashes(root: Path) -> dict[str, str]:
    return {path.relative_to(root).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(root.rglob("*")) if path.is_file()}


def test_the_generator_rewrites_the_bundled_sample(tmp_path: Path) -> None:
    done = run([sys.executable, "-m", "tools.sample_data", "--out", str(tmp_path)], REPO)
    assert done.stdout == f"wrote the sample data to {tmp_path}\n"
    made, bundled = _hashes(tmp_path), _hashes(SAMPLE)
    assert sorted(made) == sorted(bundled), "files missing from or extra to gpt1/sample_data"
    differ = [name for name in made if made[name] != bundled[name]]
    assert not differ, f"the generator writes other bytes than gpt1/sample_data has: {differ}"
