"""A smoke run of `bench.loader` at --tiny sizes on the bundled data: it runs end to end and
writes its JSON. No timing is asserted: the figures depend on the machine."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import loader
from tests.bench.tiny_results import tiny_tables

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_loader_tiny(tmp_path: Path) -> None:
    (table,) = tiny_tables(loader.main(["--tiny", "--repeats", "2", "--out", str(tmp_path)]),
                           "loader")
    (row,) = table["rows"]
    assert row["loader_batches"] > 0 and row["model_steps"] > 0
    assert row["ratio"] == pytest.approx(row["loader_batches"] / row["model_steps"])
