"""`pretrain.source` end to end through `dvc repro` on the tiny preset: fine-tuning one task of
each family from a synthetic OpenAI release (the original's files, small dimensions, the real
40,478-token vocabulary) and from a HuggingFace directory that transformers saved, then back to
pretraining here; a release that does not fit the params stops before any fine-tuning."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from gpt1.corpus.text import TextCleaner
from gpt1.corpus.tokenizer import GPT1Tokenizer
from reference.original_gpt1 import TextEncoder
from tests.conftest import dvc, edit_params, keep_only_tasks
from tests.e2e.test_dvc import declared_stages, ran_stages
from tests.releases import write_hf_directory, write_openai_release

pytestmark = pytest.mark.e2e

FAMILIES = ["sst2", "rte", "mrpc", "story_cloze"]  # classification, entailment, similarity, choice
FINETUNES = [f"finetune@{task}" for task in FAMILIES]
N_VOCAB = 40_478


def _json(repo: Path, rel: str) -> dict:
    return json.loads((repo / rel).read_text())


def _use(repo: Path, source: str, folder: Path | str) -> None:
    edit_params(repo, **{"pretrain.source": source, "pretrain.source_dir": str(folder)})


@pytest.mark.long
def test_fine_tunes_from_a_release_then_pretrains_again(tiny_repo: Path, shared_data: Path,
                                                         tmp_path: Path) -> None:
    vocab = shared_data / "openai-gpt1"
    # the tiny preset's model: 2 layers x 32, 2 heads; 64 positions, of which n_ctx keeps 32
    release = tmp_path / "openai" / "model"
    write_openai_release(release, vocab, n_positions=64, d=32, n_layer=2)
    edit_params(tiny_repo, **{
        "ingest.max_train_examples": 120,
        "ingest.max_dev_examples": 60,
        "analysis.seeds": [1],
        "analysis.ablation.variants": ["full", "lstm"],
        "analysis.ablation.tasks": {"sst2": [60]},
        "analysis.transfer.tasks": {"sst2": 60},
        "analysis.zero_shot.tasks": {"sst2": "sentiment"},
    })
    keep_only_tasks(tiny_repo, FAMILIES)
    _use(tiny_repo, "openai", release)
    first = ran_stages(dvc("repro", cwd=tiny_repo).stdout)
    assert first[:6] == ["code", "ingest", "clean", "bpe", "tokenize", "pretrain"]
    assert set(FINETUNES) <= set(first) and first[-1] == "report"
    # the LSTM control is pretrained only beside a Transformer pretrained here: under a release
    # neither it nor Table 5's LSTM cell is a stage, and the report says why
    released = ("pretrain.source is openai: the LSTM control is pretrained only beside a "
                "Transformer pretrained here, on the same shards")
    declared = declared_stages(tiny_repo)
    for stage in ("pretrain_control@lstm", "ablation@lstm-sst2"):
        assert stage not in first and stage not in declared, stage
    assert "ablation@full-sst2" in first

    # the model and tokenizer are the release's; nothing was pretrained here
    pretrained = _json(tiny_repo, "metrics/pretrain.json")
    assert (pretrained["source"], pretrained["source_dir"]) == ("openai", str(release))
    assert (pretrained["vocab_size"], pretrained["n_ctx"], pretrained["n_layer"]) == (
        N_VOCAB + 4, 32, 2)
    for folder in ("artifacts/bpe", "data/shards"):
        status = _json(tiny_repo, f"{folder}/status.json")
        assert not status["run"] and "pretrain.source is openai" in status["reason"], folder
    for absent in ("artifacts/pretrain_lstm", "metrics/pretrain_lstm.json",
                   "metrics/ablation/lstm/sst2.json"):
        assert not (tiny_repo / absent).exists(), absent
    assert _json(tiny_repo, "metrics/ablation/full/sst2.json")["run"]
    assert _json(tiny_repo, "metrics/zero_shot/sst2.json")["trunks"] == {}  # no snapshots
    heldout = _json(tiny_repo, "metrics/lm_eval.json")
    assert heldout["run"] and heldout["val_loss"] is None
    assert heldout["all"]["tokens"] > 50_000 and heldout["all"]["unigram_loss"] is None
    for task in FAMILIES:
        assert _json(tiny_repo, f"metrics/finetune/{task}.json")["run"], task
    report = (tiny_repo / "reports" / "summary.md").read_text()
    assert "Imported from OpenAI's released GPT-1 in " in report
    assert released in report, report  # Table 5's LSTM row: why it is empty

    # fine-tuning encodes task text as the original TextEncoder does (line breaks aside)
    tok = GPT1Tokenizer.load(tiny_repo / "artifacts" / "pretrain" / "tokenizer.json")
    assert (tok.vocab_size, tok.start_id, tok.pad_id) == (N_VOCAB + 4, N_VOCAB, N_VOCAB + 3)
    original = TextEncoder(vocab / "encoder_bpe_40000.json", vocab / "vocab_40000.bpe")
    sentences = pq.read_table(tiny_repo / "data/raw/tasks/sst2/dev.parquet").column(
        "text").to_pylist()
    cleaner = TextCleaner()
    assert [tok.encode(cleaner(s)) for s in sentences] == [original.encode(s) for s in sentences]

    # DVC tracks the release folder: nothing to do, until a file in it changes
    assert "up to date" in dvc("status", cwd=tiny_repo).stdout
    shard = release / "params_3.npy"
    np.save(shard, np.load(shard) * 0.5)
    status = json.loads(dvc("status", "--json", cwd=tiny_repo).stdout)
    assert status == {"pretrain": [{"changed deps": {str(release): "modified"}}]}

    # a HuggingFace directory saved by transformers. Every family's input transform and every
    # analysis has been through an imported model above: from here on SST-2 alone is fine-tuned,
    # and of the analyses the LSTM's cell (which follows the source) and zero-shot are left
    hf_dir = tmp_path / "hf" / "openai-gpt"
    write_hf_directory(hf_dir, vocab, n_positions=48, d=32, n_layer=2, n_head=2)
    _use(tiny_repo, "hf", hf_dir)
    edit_params(tiny_repo, **{"lm_eval.files": [], "analysis.ablation.variants": ["lstm"],
                              "analysis.transfer.tasks": {}})
    keep_only_tasks(tiny_repo, ["sst2"])  # finetune@sst2 alone: no stage for the others
    from_hf = ran_stages(dvc("repro", cwd=tiny_repo).stdout)
    assert "pretrain" in from_hf and "finetune@sst2" in from_hf
    assert _json(tiny_repo, "metrics/pretrain.json")["source"] == "hf"
    assert _json(tiny_repo, "metrics/finetune/sst2.json")["run"]
    assert "Imported from a HuggingFace openai-gpt model in " in (
        tiny_repo / "reports" / "summary.md").read_text()
    assert "up to date" in dvc("status", cwd=tiny_repo).stdout

    # a release that does not fit the params stops at pretrain, before any fine-tuning
    bad = tmp_path / "bad" / "model"
    write_openai_release(bad, vocab, n_positions=64, d=32, n_layer=3)
    _use(tiny_repo, "openai", bad)
    failed = dvc("repro", cwd=tiny_repo, check=False)
    assert failed.returncode != 0
    assert "its n_layer is 3, model.n_layer is 2: set model.n_layer=3" in failed.stderr
    assert "finetune@sst2" not in ran_stages(failed.stdout)
    shutil.rmtree(bad.parent)

    # back to pretraining here: the own path runs again
    _use(tiny_repo, "train", "data/shards")
    own = ran_stages(dvc("repro", cwd=tiny_repo).stdout)
    assert own[:5] == ["ingest", "bpe", "tokenize", "pretrain", "pretrain_control@lstm"]
    assert "ablation@lstm-sst2" in own
    pretrained = _json(tiny_repo, "metrics/pretrain.json")
    assert "source" not in pretrained and pretrained["steps"] == 20
    assert GPT1Tokenizer.load(tiny_repo / "artifacts/pretrain/tokenizer.json").vocab_size < 1000
    assert _json(tiny_repo, "metrics/ablation/lstm/sst2.json")["run"]
    assert "up to date" in dvc("status", cwd=tiny_repo).stdout
