"""An analysis cell made small for tests: the repository's params.yaml with `analysis` keys set,
and a cell of sst2 whose rows are numbered (gpt1.downstream.cells, and the ablation and transfer
jobs that lay cells out)."""

from __future__ import annotations

from typing import Any

import numpy as np

from gpt1.config import Params, parse_params, read_yaml
from gpt1.downstream import cells
from gpt1.downstream.seed_runs import Split
from tests.conftest import REPO


def analysis_params(**analysis: Any) -> Params:
    raw = read_yaml((REPO / "params.yaml").read_text(encoding="utf-8"))
    raw["analysis"].update(analysis)
    return parse_params(raw)


def _split(rows: int, first: int = 0) -> Split:
    ids = np.arange(first, first + rows)
    return Split([[[int(i), 1]] for i in ids], ids % 2, ids, np.full(rows, 2))


def toy_cell(params: Params, train: int = 5, dev: int = 3) -> cells.Cell:
    data = {"train": _split(train), "dev": _split(dev, 100)}
    return cells.Cell("sst2", params.tasks["sst2"], data, pad_id=0)
