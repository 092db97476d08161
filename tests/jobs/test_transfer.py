"""gpt1.jobs.transfer: the transfer job's metrics file (Figure 2, left), one entry per number of
blocks transferred and what they share once; the ends that Table 5's cells fine-tune already
are named, not fine-tuned again, and fine-tuned for real they are those cells run for run; a
model other than GPT-1 is refused. Loading and fine-tuning the cell are otherwise stubbed
(tests/downstream/test_cells.py tests them)."""

from __future__ import annotations

import copy
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from gpt1.config import Params
from gpt1.downstream import cells
from gpt1.errors import InputError
from gpt1.jobs import ablation, transfer
from gpt1.model.lstm import LSTM, LSTMConfig
from gpt1.model.transfer import transfer_layers
from gpt1.model.transformer import GPT1, GPT1Config
from tests.toy_cells import analysis_params, toy_cell


def test_transfer_cell_one_entry_per_k_what_they_share_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    params = analysis_params(transfer={"tasks": {"sst2": 3}})
    model = GPT1(GPT1Config(vocab_size=30, n_ctx=8, n_embd=8, n_layer=2, n_head=2))
    ks: list[tuple] = []

    def fine_tune_cell(params: Params, cell: cells.Cell, trunk_for_seed: Any) -> dict[str, Any]:
        k, seed = trunk_for_seed(9)
        ks.append((k, seed, len(cell.data["train"].examples)))
        return {"accuracy": 10.0 * k, "train_examples": 3, "eval_examples": {"dev": 3},
                "lm_coef": 0.5, "metrics": ["accuracy"], "seeds": [9], "runs": [{"k": k}]}

    monkeypatch.setattr(transfer, "load_cell", lambda params, task, task_dir, pretrained:
                        toy_cell(params))
    monkeypatch.setattr(transfer, "load_model", lambda path: model)
    monkeypatch.setattr(transfer, "transfer_layers", lambda m, k, seed: (k, seed))
    monkeypatch.setattr(transfer, "fine_tune_cell", fine_tune_cell)
    result = transfer.transfer_cell(params, "sst2", Path("tasks/sst2"), Path("pre"))
    assert ks == [(0, 9, 3), (1, 9, 3), (2, 9, 3)]
    assert list(result) == ["task", "run", "max_train_examples", "train_examples",
                            "eval_examples", "lm_coef", "metrics", "seeds", "n_layer",
                            "layers_0", "layers_1", "layers_2"]
    assert result["max_train_examples"] == 3 and result["n_layer"] == 2
    assert result["layers_1"] == {"k": 1, "accuracy": 10.0, "runs": [{"k": 1}]}


def test_transfer_cell_takes_the_ends_table_5_fine_tunes_already(
        monkeypatch: pytest.MonkeyPatch) -> None:
    params = analysis_params(transfer={"tasks": {"sst2": 3}},
                             ablation={"variants": ["full", "no_pretrain"],
                                       "tasks": {"sst2": [3, 4]}})
    model = GPT1(GPT1Config(vocab_size=30, n_ctx=8, n_embd=8, n_layer=2, n_head=2))
    ks: list[int] = []

    def fine_tune_cell(params: Params, cell: cells.Cell, trunk_for_seed: Any) -> dict[str, Any]:
        ks.append(trunk_for_seed(9))
        return {"accuracy": 50.0, "train_examples": 3, "runs": [{"k": 1}]}

    monkeypatch.setattr(transfer, "load_cell", lambda params, task, task_dir, pretrained:
                        toy_cell(params))
    monkeypatch.setattr(transfer, "load_model", lambda path: model)
    monkeypatch.setattr(transfer, "transfer_layers", lambda m, k, seed: k)
    monkeypatch.setattr(transfer, "fine_tune_cell", fine_tune_cell)
    result = transfer.transfer_cell(params, "sst2", Path("tasks/sst2"), Path("pre"))
    assert ks == [1]  # k = 0 and k = n_layer are Table 5's no_pretrain and full cells
    assert result["layers_0"] == {"k": 0, "from_ablation": "no_pretrain"}
    assert result["layers_1"] == {"k": 1, "accuracy": 50.0, "runs": [{"k": 1}]}
    assert result["layers_2"] == {"k": 2, "from_ablation": "full"}
    assert {key: result[key] for key in transfer.SHARED} == {
        "train_examples": 3, "eval_examples": {"dev": 3},
        "lm_coef": params.finetune.train.lm_coef, "metrics": ["accuracy"],
        "seeds": params.analysis.seeds}


def test_the_ends_of_figure_2_are_table_5s_cells_run_for_run(
        monkeypatch: pytest.MonkeyPatch, one_torch_thread: None) -> None:
    """What lets transfer_cell take its ends from the ablation: fine-tuned for real, k = 0
    blocks transferred is `no_pretrain` and k = n_layer is `full`, seed for seed."""
    params = analysis_params(seeds=[1, 2])
    pretrained = GPT1(GPT1Config(vocab_size=128, n_ctx=8, n_embd=8, n_layer=2, n_head=2))
    monkeypatch.setattr(ablation, "load_model", lambda path: copy.deepcopy(pretrained))
    cell = toy_cell(params, train=6)

    def runs(trunk_for_seed: Any) -> list[dict[str, Any]]:
        result = cells.fine_tune_cell(params, cell, trunk_for_seed)
        return [{k: v for k, v in run.items() if k != "seconds"} for run in result["runs"]]

    for k, variant in ((0, "no_pretrain"), (2, "full")):
        transferred = runs(lambda seed, k=k: transfer_layers(pretrained, k, seed))
        assert transferred == runs(partial(ablation.variant_trunk, variant, Path("pre"),
                                           Path("lstm")))
    assert runs(lambda seed: transfer_layers(pretrained, 1, seed)) != transferred


def test_transfer_cell_refuses_a_model_other_than_gpt1(monkeypatch: pytest.MonkeyPatch) -> None:
    params = analysis_params(transfer={"tasks": {"sst2": None}})
    monkeypatch.setattr(transfer, "load_cell", lambda params, task, task_dir, pretrained:
                        toy_cell(params))
    monkeypatch.setattr(transfer, "load_model",
                        lambda path: LSTM(LSTMConfig(vocab_size=30, n_ctx=8, n_embd=8)))
    with pytest.raises(InputError, match=r"^pre: layers are transferred from a GPT-1 model, not "
                                         r"a lstm$"):
        transfer.transfer_cell(params, "sst2", Path("tasks/sst2"), Path("pre"))
