"""gpt1.downstream.cells: the analysis stages' cells. A cell's data (eval splits capped, train cut
per size), fine-tuning it once per seed, and which ends of Figure 2 an ablation cell fine-tunes
already; fine-tuning itself is stubbed (tests/training/test_finetune_loop.py tests it). How the
ablation and transfer jobs lay out their metrics files: tests/jobs/test_ablation.py and
tests/jobs/test_transfer.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpt1.corpus.tokenizer import GPT1Tokenizer, train_bpe
from gpt1.downstream import cells
from gpt1.downstream.seed_runs import SeedRun, Split
from gpt1.jobs.ingest import ingest_task
from gpt1.model.transformer import GPT1Config
from tests.conftest import REPO
from tests.toy_cells import analysis_params, toy_cell

SAMPLE = REPO / "gpt1" / "sample_data"


def test_a_cell_at_a_size_keeps_the_first_train_rows_and_every_eval_row() -> None:
    cell = toy_cell(analysis_params())
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
    params = analysis_params(max_dev_examples=4)
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
    params = analysis_params(seeds=[3, 1, 2])
    calls = _stub_seed_runs(monkeypatch, {3: 70.0, 1: 90.0, 2: 80.25})
    result = cells.fine_tune_cell(params, toy_cell(params), lambda seed: f"trunk {seed}")
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
    params = analysis_params(seeds=[1])
    calls = _stub_seed_runs(monkeypatch, {1: 50.0})
    assert cells.fine_tune_cell(params, toy_cell(params), str, lm_coef=0.0)["lm_coef"] == 0.0
    assert calls[0][1] == 0.0


@pytest.mark.parametrize(("ablation", "reused"), [
    ({"variants": ["full", "no_pretrain"], "tasks": {"sst2": [3]}}, {0: "no_pretrain", 2: "full"}),
    ({"variants": ["full", "no_aux"], "tasks": {"sst2": [3]}}, {2: "full"}),
    ({"variants": ["no_pretrain"], "tasks": {"sst2": [None]}}, {}),  # another size
    ({"variants": ["full", "no_pretrain"], "tasks": {"rte": [3]}}, {})])  # another task
def test_ablation_ends(ablation: dict[str, Any], reused: dict[int, str]) -> None:
    params = analysis_params(ablation=ablation)
    assert cells.ablation_ends(params.analysis.ablation, "sst2", 3, n_layer=2) == reused
