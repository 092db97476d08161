"""tasks.zero_shot: the sample tasks as ingest writes them, a tokenizer and snapshots of a tiny
GPT-1, one of them rigged to say "positive" after anything and one "negative"; the metrics file
has the shape the report reads, a task without data is not run, and a trunk that was not
pretrained is left out. (The scoring itself is gpt1.jobs.zero_shot's.)"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from gpt1.config import Params, ParamsError, parse_params, read_yaml
from gpt1.corpus.tokenizer import GPT1Tokenizer, train_bpe
from gpt1.errors import InputError
from gpt1.model.lstm import LSTM, LSTMConfig
from gpt1.model.registry import save_model
from gpt1.model.transformer import GPT1, GPT1Config
from tasks import ingest, zero_shot
from tasks.paths import (
    PRETRAIN_DIR,
    PRETRAIN_LSTM_DIR,
    PRETRAIN_SNAPSHOTS,
    RAW_TASKS,
    ZERO_SHOT_METRICS,
)
from tests.conftest import REPO

pytestmark = pytest.mark.usefixtures("one_torch_thread")

CAP = 15  # analysis.zero_shot.max_examples: below every split's rows
STEPS = {0: None, 5: "positive", 20: "negative"}  # step -> the word its model always predicts


def raw_params(**zero_shot: object) -> dict[str, Any]:
    raw = read_yaml((REPO / "params.yaml").read_text(encoding="utf-8"))
    raw["ingest"].update({"root": str(REPO / "gpt1" / "sample_data"),
                          "corpus": ["corpus/01_*.txt"], "max_train_examples": 40,
                          "max_dev_examples": 30})
    raw["finetune"]["tasks"] = "all"  # a task without data is recorded as not run
    raw["pretrain"].update({"device": "cpu", "precision": "fp32"})
    # every heuristic, on a task with sample data and one without (race)
    raw["analysis"]["zero_shot"].update({"max_examples": CAP, "batch_size": 8, "tasks": {
        "sst2": "sentiment", "cola": "acceptability", "story_cloze": "choice", "race": "choice"},
        **zero_shot})
    return raw


def tokenizer() -> GPT1Tokenizer:
    """Trained on SST-2's sentences and the sentiment prompt's words, each of them one token."""
    texts = pq.read_table(RAW_TASKS / "sst2" / "train.parquet").column("text").to_pylist()
    tok = GPT1Tokenizer(train_bpe([*texts, *["very negative positive"] * 200], 300, 2))
    tok.backend.save(str(PRETRAIN_DIR / "tokenizer.json"))
    assert all(len(tok.encode(word)) == 1 for word in ("very", "negative", "positive"))
    return tok


def gpt1_snapshot(tok: GPT1Tokenizer, step: int, word: str | None) -> None:
    """A tiny GPT-1; rigged to predict `word` next whatever it reads (its last LayerNorm gives
    every position the same state, which the tied head scores highest for `word`)."""
    torch.manual_seed(step)
    model = GPT1(GPT1Config(vocab_size=tok.vocab_size, n_ctx=32, n_embd=16, n_layer=1, n_head=2))
    if word is not None:
        with torch.no_grad():
            model.h[-1].ln_2.weight.zero_()
            model.h[-1].ln_2.bias.copy_(torch.eye(16)[0])
            model.tokens_embed.weight[tok.encode(word)[0], 0] = 20.0
    folder = PRETRAIN_DIR / PRETRAIN_SNAPSHOTS / f"step-{step:08d}"
    folder.mkdir(parents=True)
    save_model(model, folder)


@pytest.fixture()
def params(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Params:
    """Ingested sample tasks, the tokenizer and GPT-1 snapshots of `STEPS`, the LSTM not
    pretrained."""
    monkeypatch.chdir(tmp_path)
    parsed = parse_params(raw_params())
    ingest.run(parsed)
    PRETRAIN_DIR.mkdir(parents=True)
    tok = tokenizer()
    for step, word in STEPS.items():
        gpt1_snapshot(tok, step, word)
    PRETRAIN_LSTM_DIR.mkdir(parents=True)
    (PRETRAIN_LSTM_DIR / "status.json").write_text(
        json.dumps({"run": False, "reason": "lstm is not in analysis.ablation.variants"}))
    return parsed


def run_all(params: Params) -> dict[str, dict[str, Any]]:
    """Every zero_shot@<task> stage; task -> its metrics file."""
    for task in params.analysis.zero_shot.tasks:
        zero_shot.run(params, task)
    return {task: json.loads((ZERO_SHOT_METRICS / f"{task}.json").read_text())
            for task in params.analysis.zero_shot.tasks}


def test_every_snapshot_scores_every_task_with_data(params: Params) -> None:
    out = run_all(params)
    # the stage's time is its stage record's (tasks/stage.py), not the metrics file's
    assert not any("seconds" in result for result in out.values())
    trunks = {task: result.pop("trunks") for task, result in out.items() if result["run"]}
    assert out["sst2"] == {"task": "sst2", "run": True, "heuristic": "sentiment",
                           "metric": "accuracy", "split": "dev", "chance": 50.0, "examples": CAP}
    assert out["cola"] == {"task": "cola", "run": True, "heuristic": "acceptability",
                           "metric": "mcc", "split": "dev", "chance": 0.0, "examples": CAP,
                           "train_examples": CAP}
    assert out["story_cloze"] == {"task": "story_cloze", "run": True, "heuristic": "choice",
                                  "metric": "accuracy", "split": "dev", "chance": 50.0,
                                  "examples": CAP}
    race = json.loads((RAW_TASKS / "race" / "status.json").read_text())
    assert out["race"] == {"task": "race", "run": False, "reason": race["reason"]}
    assert race["reason"].startswith("data not found at ")

    assert set(trunks) == {"sst2", "cola", "story_cloze"}
    for name, by_trunk in trunks.items():
        assert list(by_trunk) == ["gpt1"]  # the LSTM was not pretrained
        curve = by_trunk["gpt1"]
        low = -100.0 if out[name]["metric"] == "mcc" else 0.0
        assert curve["steps"] == list(STEPS), name
        assert len(curve["scores"]) == len(STEPS), name
        assert all(low <= s <= 100.0 for s in curve["scores"]), name


def test_sentiment_reads_label_1_as_positive_on_the_first_rows(params: Params) -> None:
    """The model that always says "positive" answers label 1 to each of the first CAP dev
    sentences, the one that says "negative" label 0: their accuracies are the labels' shares."""
    sst2 = run_all(params)["sst2"]
    labels = pq.read_table(RAW_TASKS / "sst2" / "dev.parquet").column("label").to_numpy()[:CAP]
    positive = round(100.0 * float(np.mean(labels == 1)), 2)
    assert positive != 50.0  # else swapping the words would go unnoticed
    assert sst2["trunks"]["gpt1"]["scores"][1:] == pytest.approx(
        [positive, 100.0 - positive], abs=0.01)


def test_a_pretrained_lstm_is_scored_beside_the_transformer(params: Params) -> None:
    shutil.rmtree(PRETRAIN_LSTM_DIR)
    torch.manual_seed(0)
    vocab = GPT1Tokenizer.load(PRETRAIN_DIR / "tokenizer.json").vocab_size
    for step in (0, 300):
        folder = PRETRAIN_LSTM_DIR / PRETRAIN_SNAPSHOTS / f"step-{step:08d}"
        folder.mkdir(parents=True)
        save_model(LSTM(LSTMConfig(vocab_size=vocab, n_ctx=32, n_embd=16)), folder)
    out = run_all(params)
    for task in ("sst2", "cola", "story_cloze"):
        lstm = out[task]["trunks"]["lstm"]
        assert lstm["steps"] == [0, 300] and len(lstm["scores"]) == 2, task


def test_a_heuristic_that_cannot_answer_the_task_fails_at_load_naming_the_key() -> None:
    with pytest.raises(ParamsError, match=r"^params\.yaml: analysis\.zero_shot\.tasks\.rte: "
                                          r"the sentiment heuristic answers classification "
                                          r"tasks; rte is entailment$"):
        parse_params(raw_params(tasks={"rte": "sentiment"}))


def test_a_task_outside_analysis_zero_shot_is_refused_writing_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match=r"^task 'rte' is not in analysis\.zero_shot\.tasks "
                                         r"\(\['cola', 'race', 'sst2', 'story_cloze'\]\)$"):
        zero_shot.run(parse_params(raw_params()), "rte")
    assert not ZERO_SHOT_METRICS.exists()


def test_damaged_ingest_status_names_itself_and_the_stage(params: Params) -> None:
    (RAW_TASKS / "race" / "status.json").write_text('{"run": fal')
    with pytest.raises(InputError, match=r"^data/raw/tasks/race/status\.json: damaged, not the "
                                         r"JSON stage ingest writes .*dvc repro --force ingest"):
        zero_shot.run(params, "race")
    assert not (ZERO_SHOT_METRICS / "race.json").exists()


def test_a_task_without_data_is_recorded_as_not_run_byte_for_byte(params: Params) -> None:
    zero_shot.run(params, "race")
    reason = json.loads((RAW_TASKS / "race" / "status.json").read_text())["reason"]
    assert (ZERO_SHOT_METRICS / "race.json").read_text() == json.dumps(
        {"task": "race", "run": False, "reason": reason}, indent=2) + "\n"
