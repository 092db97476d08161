"""gpt1.downstream.cells: the analysis stages' cells. A cell's data (eval splits capped, train cut
per size), fine-tuning it once per seed, and how the ablation and transfer jobs lay out their
metrics files; fine-tuning itself is stubbed (tests/training/test_finetune_loop.py tests it), but
where it shows that Figure 2's ends are Table 5's cells."""

from __future__ import annotations

import copy
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gpt1.config import Params, parse_params, read_yaml
from gpt1.corpus.tokenizer import GPT1Tokenizer, train_bpe
from gpt1.downstream import cells
from gpt1.downstream.seed_runs import SeedRun, Split
from gpt1.errors import InputError
from gpt1.jobs import ablation, transfer
from gpt1.jobs.ingest import ingest_task
from gpt1.model.lstm import LSTM, LSTMConfig
from gpt1.model.transfer import transfer_layers
from gpt1.model.transformer import GPT1, GPT1Config
from tests.conftest import REPO

SAMPLE = REPO / "gpt1" / "sample_data"


def _params(**analysis: Any) -> Params:
    raw = read_yaml((REPO / "params.yaml").read_text(encoding="utf-8"))
    raw["analysis"].update(analysis)
    return parse_params(raw)


def _split(rows: int, first: int = 0) -> Split:
    ids = np.arange(first, first + rows)
    return Split([[[int(i), 1]] for i in ids], ids % 2, ids)


def _cell(params: Params, train: int = 5, dev: int = 3) -> cells.Cell:
    data = {"train": _split(train), "dev": _split(dev, 100)}
    return cells.Cell("sst2", params.tasks["sst2"], data, pad_id=0)


def test_a_cell_at_a_size_keeps_the_first_train_rows_and_every_eval_row() -> None:
    cell = _cell(_params())
    cut = cell.at_size(2)
    assert cut.data["train"].examples == [[[0, 1]], [[1, 1]]]
    assert cut.data["train"].targets.tolist() == [0, 1]
    assert cut.data["train"].idx.tolist() == [0, 1]
    assert cut.data["dev"] is cell.data["dev"]
    assert cell.at_size(None).data == cell.data
    assert len(cell.data["train"].examples) == 5  # the cell itself is left as it was


def test_size_keys() -> None:
    assert [cells.size_key(s) for s in (1000, None)] == ["train_1000", "train_all"]


def test_load_cell_caps_the_eval_splits_alone(tmp_path: Path) -> None:
    params = _params(max_dev_examples=4)
    spec = params.tasks["sst2"]
    task_dir, pretrained = tmp_path / "sst2", tmp_path / "pretrained"
    task_dir.mkdir()
    pretrained.mkdir()
    rows = ingest_task("sst2", spec, params, SAMPLE, task_dir)
    tok = GPT1Tokenizer(train_bpe(["a good film .", "a bad film ."] * 5, vocab_size=40,
                                  min_frequency=1))
    tok.backend.save(str(pretrained / "tokenizer.json"))
    GPT1Config(vocab_size=tok.vocab_size, n_ctx=64, n_embd=8, n_layer=1,
               n_head=2).save(pretrained / "config.json")
    cell = cells.load_cell(params, "sst2", task_dir, pretrained)
    assert rows["dev"] > 4
    assert {s: len(d.examples) for s, d in cell.data.items()} == {"train": rows["train"],
                                                                 "dev": 4}
    assert cell.pad_id == tok.pad_id and cell.spec == spec


def _stub_seed_runs(monkeypatch: pytest.MonkeyPatch, accuracy: dict[int, float]) -> list[tuple]:
    calls: list[tuple] = []

    def run_seed(task: Any, cfg: Any, trunk: Any, data: dict[str, Split], pad_id: int) -> SeedRun:
        calls.append((cfg.seed, cfg.lm_coef, trunk, pad_id, len(data["train"].examples)))
        return SeedRun(cfg.seed, None, [{"dev": {"dev": {"accuracy": accuracy[cfg.seed]}}}],
                       {"seed": cfg.seed}, {"device": "cpu"})

    monkeypatch.setattr(cells, "run_seed", run_seed)
    return calls


def test_fine_tune_cell_runs_each_seed_on_its_own_trunk(monkeypatch: pytest.MonkeyPatch) -> None:
    params = _params(seeds=[3, 1, 2])
    calls = _stub_seed_runs(monkeypatch, {3: 70.0, 1: 90.0, 2: 80.25})
    result = cells.fine_tune_cell(params, _cell(params), lambda seed: f"trunk {seed}")
    lm_coef = params.finetune.train.lm_coef
    assert calls == [(3, lm_coef, "trunk 3", 0, 5), (1, lm_coef, "trunk 1", 0, 5),
                     (2, lm_coef, "trunk 2", 0, 5)]
    assert result == {
        "split": "dev", "accuracy": 80.25, "accuracy_min": 70.0, "accuracy_max": 90.0,
        "by_seed": {"3": {"accuracy": 70.0}, "1": {"accuracy": 90.0}, "2": {"accuracy": 80.25}},
        "train_examples": 5, "eval_examples": {"dev": 3}, "lm_coef": lm_coef,
        "metrics": ["accuracy"], "seeds": [3, 1, 2],
        "runs": [{"seed": 3}, {"seed": 1}, {"seed": 2}]}


def test_fine_tune_cell_with_lm_coef_sets_lambda(monkeypatch: pytest.MonkeyPatch) -> None:
    params = _params(seeds=[1])
    calls = _stub_seed_runs(monkeypatch, {1: 50.0})
    assert cells.fine_tune_cell(params, _cell(params), str, lm_coef=0.0)["lm_coef"] == 0.0
    assert calls[0][1] == 0.0


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
                        _cell(params))
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
    params = _params(ablation={"variants": ["full"], "tasks": {"sst2": [2, None]}})
    result = ablation.ablation_cell(params, variant, "sst2", Path("tasks/sst2"), Path("pre"),
                                 Path("lstm"))
    assert stubbed == [(2, lm_coef, trunk), (5, lm_coef, trunk)]
    assert result == {"variant": variant, "task": "sst2", "run": True,
                      "sizes": ["train_2", "train_all"],
                      "train_2": {"max_train_examples": 2, "accuracy": 2.0, "train_examples": 2},
                      "train_all": {"max_train_examples": None, "accuracy": 5.0,
                                    "train_examples": 5}}
    assert list(result) == ["variant", "task", "run", "sizes", "train_2", "train_all"]


def test_transfer_cell_one_entry_per_k_what_they_share_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    params = _params(transfer={"tasks": {"sst2": 3}})
    model = GPT1(GPT1Config(vocab_size=30, n_ctx=8, n_embd=8, n_layer=2, n_head=2))
    ks: list[tuple] = []

    def fine_tune_cell(params: Params, cell: cells.Cell, trunk_for_seed: Any) -> dict[str, Any]:
        k, seed = trunk_for_seed(9)
        ks.append((k, seed, len(cell.data["train"].examples)))
        return {"accuracy": 10.0 * k, "train_examples": 3, "eval_examples": {"dev": 3},
                "lm_coef": 0.5, "metrics": ["accuracy"], "seeds": [9], "runs": [{"k": k}]}

    monkeypatch.setattr(transfer, "load_cell", lambda params, task, task_dir, pretrained:
                        _cell(params))
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
    params = _params(transfer={"tasks": {"sst2": 3}},
                     ablation={"variants": ["full", "no_pretrain"], "tasks": {"sst2": [3, 4]}})
    model = GPT1(GPT1Config(vocab_size=30, n_ctx=8, n_embd=8, n_layer=2, n_head=2))
    ks: list[int] = []

    def fine_tune_cell(params: Params, cell: cells.Cell, trunk_for_seed: Any) -> dict[str, Any]:
        ks.append(trunk_for_seed(9))
        return {"accuracy": 50.0, "train_examples": 3, "runs": [{"k": 1}]}

    monkeypatch.setattr(transfer, "load_cell", lambda params, task, task_dir, pretrained:
                        _cell(params))
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


@pytest.mark.parametrize(("ablation", "reused"), [
    ({"variants": ["full", "no_pretrain"], "tasks": {"sst2": [3]}}, {0: "no_pretrain", 2: "full"}),
    ({"variants": ["full", "no_aux"], "tasks": {"sst2": [3]}}, {2: "full"}),
    ({"variants": ["no_pretrain"], "tasks": {"sst2": [None]}}, {}),  # another size
    ({"variants": ["full", "no_pretrain"], "tasks": {"rte": [3]}}, {})])  # another task
def test_ablation_ends(ablation: dict[str, Any], reused: dict[int, str]) -> None:
    params = _params(ablation=ablation)
    assert cells.ablation_ends(params.analysis.ablation, "sst2", 3, n_layer=2) == reused


def test_the_ends_of_figure_2_are_table_5s_cells_run_for_run(
        monkeypatch: pytest.MonkeyPatch, one_torch_thread: None) -> None:
    """What lets transfer_cell take its ends from the ablation: fine-tuned for real, k = 0
    blocks transferred is `no_pretrain` and k = n_layer is `full`, seed for seed."""
    params = _params(seeds=[1, 2])
    pretrained = GPT1(GPT1Config(vocab_size=128, n_ctx=8, n_embd=8, n_layer=2, n_head=2))
    monkeypatch.setattr(ablation, "load_model", lambda path: copy.deepcopy(pretrained))
    cell = _cell(params, train=6)

    def runs(trunk_for_seed: Any) -> list[dict[str, Any]]:
        result = cells.fine_tune_cell(params, cell, trunk_for_seed)
        return [{k: v for k, v in run.items() if k != "seconds"} for run in result["runs"]]

    for k, variant in ((0, "no_pretrain"), (2, "full")):
        transferred = runs(lambda seed, k=k: transfer_layers(pretrained, k, seed))
        assert transferred == runs(partial(ablation.variant_trunk, variant, Path("pre"),
                                           Path("lstm")))
    assert runs(lambda seed: transfer_layers(pretrained, 1, seed)) != transferred


def test_transfer_cell_refuses_a_model_other_than_gpt1(monkeypatch: pytest.MonkeyPatch) -> None:
    params = _params(transfer={"tasks": {"sst2": None}})
    monkeypatch.setattr(transfer, "load_cell", lambda params, task, task_dir, pretrained:
                        _cell(params))
    monkeypatch.setattr(transfer, "load_model",
                        lambda path: LSTM(LSTMConfig(vocab_size=30, n_ctx=8, n_embd=8)))
    with pytest.raises(InputError, match=r"^pre: layers are transferred from a GPT-1 model, not "
                                         r"a lstm$"):
        transfer.transfer_cell(params, "sst2", Path("tasks/sst2"), Path("pre"))
