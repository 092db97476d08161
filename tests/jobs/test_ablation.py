"""gpt1.jobs.ablation: the ablation job's metrics file, one entry per train size of a cell, each
variant fine-tuning its own trunk (pretrained, without the LM loss, freshly initialised, the
LSTM); loading and fine-tuning the cell are stubbed (tests/downstream/test_cells.py tests
them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpt1.config import Params
from gpt1.downstream import cells
from gpt1.jobs import ablation
from tests.toy_cells import analysis_params, toy_cell


@pytest.fixture()
def stubbed(monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    """load_cell gives a 5-row cell; fine-tuning records what it was given and scores the
    number of train rows; a model folder loads as its name, transferring as a description."""
    calls: list[tuple] = []

    def fine_tune_cell(params: Params, cell: cells.Cell, trunk_for_seed: Any,
                       lm_coef: float | None = None) -> dict[str, Any]:
        train = len(cell.data["train"].examples)
        calls.append((train, lm_coef, trunk_for_seed(7)))
        return {"accuracy": float(train), "train_examples": train}

    monkeypatch.setattr(ablation, "load_cell", lambda params, task, task_dir, pretrained:
                        toy_cell(params))
    monkeypatch.setattr(ablation, "fine_tune_cell", fine_tune_cell)
    monkeypatch.setattr(ablation, "load_model", lambda path: f"model in {path}")
    monkeypatch.setattr(ablation, "transfer_layers",
                        lambda model, k, seed: f"{model}, {k} blocks, seed {seed}")
    return calls


@pytest.mark.parametrize(("variant", "lm_coef", "trunk"), [
    ("full", None, "model in pre"), ("no_aux", 0.0, "model in pre"),
    ("no_pretrain", None, "model in pre, 0 blocks, seed 7"), ("lstm", None, "model in lstm")])
def test_ablation_cell_one_entry_per_size(stubbed: list[tuple], variant: str,
                                          lm_coef: float | None, trunk: str) -> None:
    params = analysis_params(ablation={"variants": ["full"], "tasks": {"sst2": [2, None]}})
    result = ablation.ablation_cell(params, variant, "sst2", Path("tasks/sst2"), Path("pre"),
                                 Path("lstm"))
    assert stubbed == [(2, lm_coef, trunk), (5, lm_coef, trunk)]
    assert result == {"variant": variant, "task": "sst2", "run": True,
                      "sizes": ["train_2", "train_all"],
                      "train_2": {"max_train_examples": 2, "accuracy": 2.0, "train_examples": 2},
                      "train_all": {"max_train_examples": None, "accuracy": 5.0,
                                    "train_examples": 5}}
    assert list(result) == ["variant", "task", "run", "sizes", "train_2", "train_all"]
