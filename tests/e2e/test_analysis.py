"""The paper's evidence as DVC stages, end to end on the tiny preset (the shared reproduced
pipeline): Table 5's ablation cells, Figure 2's layers transferred and zero-shot snapshots, in
the report; one cell re-run alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpt1.model.lstm import LSTM
from gpt1.model.registry import load_model
from gpt1.model.transformer import GPT1
from tests.conftest import E2E_ANALYSIS, SHARED_DATA, Reproduced, dvc, edit_params
from tests.e2e.test_dvc import declared_stages, ran_stages

pytestmark = pytest.mark.e2e

SEEDS = E2E_ANALYSIS["analysis"]["seeds"]
SNAPSHOTS = [0, 5, 20]  # the tiny preset's
QNLI_TRAIN = SHARED_DATA / "glue" / "QNLI" / "train.tsv"  # the one QNLI file ../shared lacks
RACE_TRAIN = SHARED_DATA / "multiple_choice" / "RACE" / "train" / "middle"  # the first of six


def _json(repo: Path, rel: str) -> dict:
    return json.loads((repo / rel).read_text())


def _untimed(runs: list[dict]) -> list[dict]:
    """Seed runs without their wall time: what two equal runs share."""
    return [{k: v for k, v in run.items() if k != "seconds"} for run in runs]


def test_analysis_stages_end_to_end(reproduced: Reproduced) -> None:
    tiny_repo = reproduced.repo
    ran = ran_stages(reproduced.stdout)
    variants = ["full", "no_pretrain", "no_aux", "lstm"]
    cells = [f"ablation@{v}-{t}" for v in variants for t in ("sst2", "story_cloze")]
    zero_shot_tasks = ["sst2", "cola", "story_cloze"]
    assert {"pretrain_control@lstm", *cells, "transfer@story_cloze", "report",
            *(f"zero_shot@{t}" for t in zero_shot_tasks)} <= set(ran)
    # the analyses of a task that is not fine-tuned (its data absent) are no stage at all
    declared = declared_stages(tiny_repo)
    not_stages = [*(f"ablation@{v}-qnli" for v in variants), "zero_shot@race"]
    assert not set(not_stages) & {*ran, *declared}
    report = (tiny_repo / "reports" / "summary.md").read_text()

    # Table 5's cells: every variant on every task and size with the same seeds and data
    for variant in variants:
        for task, sizes, keys in (("sst2", [60, 120], ["train_60", "train_120"]),
                                  ("story_cloze", [100], ["train_100"])):
            result = _json(tiny_repo, f"metrics/ablation/{variant}/{task}.json")
            assert result["run"], (variant, task)
            assert result["sizes"] == keys
            assert [result[key]["train_examples"] for key in keys] == sizes
            for size in (result[key] for key in keys):
                assert size["seeds"] == SEEDS and size["eval_examples"] == {"dev": 100}
                assert [r["seed"] for r in size["runs"]] == SEEDS
                assert list(size["by_seed"]) == [str(seed) for seed in SEEDS]
                assert size["lm_coef"] == (0.0 if variant == "no_aux" else 0.5)
        # a task that ingest did not keep (its data is absent) is no cell: the report says why
        assert not (tiny_repo / f"metrics/ablation/{variant}/qnli.json").exists()
        assert not (tiny_repo / f"metrics/stages/ablation/{variant}-qnli.json").exists()
    qnli_why = (f"task qnli is not fine-tuned (data not found at {QNLI_TRAIN}): the analyses "
                "read the tasks ingest wrote")
    # Table 5's QNLI column: a cell per variant pointing to the one note saying why
    assert report.count("| not run (1) |") == len(variants), report
    assert f"\n- (1) {qnli_why}\n" in report, report
    full = _json(tiny_repo, "metrics/ablation/full/story_cloze.json")["train_100"]
    no_pretrain = _json(tiny_repo, "metrics/ablation/no_pretrain/story_cloze.json")["train_100"]
    assert _untimed(full["runs"]) != _untimed(no_pretrain["runs"])

    # Figure 2 left: k = 0 is the model that was not pretrained and k = n_layer the whole
    # pretrained one, Table 5's no_pretrain and full cells (tests/jobs/test_transfer.py checks
    # them run for run): at the train size where those cells ran, the file points to them
    transfer = _json(tiny_repo, "metrics/transfer/story_cloze.json")
    assert transfer["run"] and transfer["n_layer"] == 2 and transfer["seeds"] == SEEDS
    assert transfer["layers_0"] == {"k": 0, "from_ablation": "no_pretrain"}
    assert transfer["layers_2"] == {"k": 2, "from_ablation": "full"}
    assert [r["seed"] for r in transfer["layers_1"]["runs"]] == SEEDS
    # where no cell of Table 5 fine-tunes the task, every k is fine-tuned here
    rte = _json(tiny_repo, "metrics/transfer/rte.json")
    assert [[r["seed"] for r in rte[f"layers_{k}"]["runs"]] for k in (0, 1, 2)] == [SEEDS] * 3

    # the LSTM control: pretrained on the same shards for the same steps, at most the
    # Transformer's size; both trunks keep their snapshots, which load
    gpt1_metrics = _json(tiny_repo, "metrics/pretrain.json")
    lstm_metrics = _json(tiny_repo, "metrics/pretrain_lstm.json")
    assert lstm_metrics["model_type"] == "lstm"
    assert lstm_metrics["tokens"] == gpt1_metrics["tokens"]
    assert 0.8 * gpt1_metrics["parameters"] < lstm_metrics["parameters"] \
        <= gpt1_metrics["parameters"]
    for folder, trunk in (("pretrain", GPT1), ("pretrain_lstm", LSTM)):
        snapshots = sorted((tiny_repo / "artifacts" / folder / "snapshots").iterdir())
        assert [p.name for p in snapshots] == [f"step-{s:08d}" for s in SNAPSHOTS]
        assert all(isinstance(load_model(p), trunk) for p in snapshots)

    # Figure 2 right: each snapshot of each trunk scored without fine-tuning
    for task in ("sst2", "cola", "story_cloze"):
        zero_shot = _json(tiny_repo, f"metrics/zero_shot/{task}.json")
        assert zero_shot["run"] and set(zero_shot["trunks"]) == {"gpt1", "lstm"}, task
        for curve in zero_shot["trunks"].values():
            assert curve["steps"] == SNAPSHOTS and len(curve["scores"]) == len(SNAPSHOTS)
    assert not (tiny_repo / "metrics/zero_shot/race.json").exists()
    assert (f"RACE: not run: task race is not fine-tuned (data not found at {RACE_TRAIN} (and 5 "
            "more)): the analyses read the tasks ingest wrote") in report, report

    for plot in ("transfer.png", "zero_shot.png"):
        assert (tiny_repo / "reports" / "plots" / plot).is_file()
        assert f"plots/{plot}" in report
    assert "Table 5" in report

    # one cell re-runs alone when its sizes change; the others stay as they were (ingest, which
    # depends on all of params.yaml, runs again to the same outputs: nothing after it re-runs)
    edit_params(tiny_repo, **{"analysis.ablation.tasks.sst2": [80]})
    single = dvc("repro", "ablation@no_pretrain-sst2", cwd=tiny_repo)
    assert ran_stages(single.stdout) == ["ingest", "ablation@no_pretrain-sst2"]
    cell = _json(tiny_repo, "metrics/ablation/no_pretrain/sst2.json")
    assert cell["sizes"] == ["train_80"] and cell["train_80"]["train_examples"] == 80
    status = dvc("status", cwd=tiny_repo).stdout
    assert "ablation@full-sst2" in status and "ablation@no_pretrain-sst2" not in status
    assert "ablation@full-story_cloze" not in status
