"""What a benchmark's `--tiny --repeats 2` run wrote, checked as such."""

from __future__ import annotations

import json
from pathlib import Path


def tiny_tables(path: Path, name: str) -> list[dict]:
    """The tables of benchmark `name`'s result file `path`, once its name, its benchmark and its
    tiny settings are checked."""
    result = json.loads(path.read_text())
    assert path.name == f"{name}.json" and result["benchmark"] == name
    assert result["settings"]["tiny"] and result["settings"]["repeats"] == 2
    return result["tables"]
