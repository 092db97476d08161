"""gpt1.records: the pipeline's own JSON files, and a damaged one named with the stage to re-run.

The JSON files one stage writes and another reads (manifests, status files, metrics files,
stage records, a checkpoint folder's run.json): valid JSON of another shape (`{}`, `[]`, `null`,
a key missing or of the wrong type) is bad input naming the file and the stage to force, at every
place one is read; never a KeyError or TypeError from deep inside a stage or the report."""

from __future__ import annotations

import copy
import csv
import json
import logging
import shutil
from pathlib import Path
from typing import Any

import pytest

from gpt1.config import load_params
from gpt1.errors import InputError, MissingInputError, is_input_error
from gpt1.records import (
    STATUS_FILE,
    AblationMetrics,
    FinetuneMetrics,
    Generated,
    LmEvalMetrics,
    Manifest,
    PretrainLosses,
    PretrainManifest,
    PretrainMetrics,
    Ran,
    Record,
    RecordError,
    RunSettings,
    StageRecord,
    TaskStatus,
    TrainManifest,
    TransferMetrics,
    ZeroShotMetrics,
    not_run_reason,
    read_record,
    record_not_run,
    write_curve,
)
from gpt1.reporting.files import check_transfer_links, read_run
from tests.conftest import REPO
from tests.report_fixtures import (
    ABLATION,
    FILES,
    GENERATED,
    LM_EVAL,
    MNLI,
    NOT_RUN,
    PARAMS,
    PRETRAIN,
    SST2,
    TRANSFER,
    ZERO_SHOT,
    write_run,
)


@pytest.mark.parametrize("text", ['{"splits": {"train": "cut', "", "[1, 2"])
def test_a_damaged_record_names_its_file_and_the_stage_to_rerun(tmp_path: Path,
                                                               text: str) -> None:
    path = tmp_path / "manifest.json"
    path.write_text(text)
    with pytest.raises(InputError) as raised:
        read_record(path, "tokenize", Manifest)
    message = str(raised.value)
    assert message.startswith(f"{path}: damaged, not the JSON stage tokenize writes (")
    assert message.endswith("run `dvc repro --force tokenize` to write it again")


def test_a_missing_record_is_the_users_file_system_error(tmp_path: Path) -> None:
    with pytest.raises(MissingInputError) as raised:
        read_record(tmp_path / "absent.json", "tokenize", Manifest)
    assert is_input_error(raised.value, user_paths=[])  # wherever it lies
    assert str(raised.value) == f"{tmp_path / 'absent.json'}: not found (run tokenize first)"


def test_a_stage_with_nothing_to_do_records_why(tmp_path: Path) -> None:
    model, metrics = tmp_path / "model", tmp_path / "metrics" / "m.json"
    (model / "old.bin").parent.mkdir()
    (model / "old.bin").write_text("stale")
    record_not_run("lstm is not in analysis.ablation.variants", (model,), metrics, task="sst2")
    assert sorted(p.name for p in model.iterdir()) == [STATUS_FILE]
    assert json.loads(metrics.read_text()) == {
        "task": "sst2", "run": False, "reason": "lstm is not in analysis.ablation.variants"}
    assert (not_run_reason(model, "pretrain_control@lstm")
            == "lstm is not in analysis.ablation.variants")
    assert not_run_reason(tmp_path / "ran", "pretrain") is None
    (model / STATUS_FILE).write_text('{"run": tr')
    with pytest.raises(InputError, match=r"dvc repro --force pretrain_control@lstm"):
        not_run_reason(model, "pretrain_control@lstm")


MANIFEST = {"dtype": "uint16", "vocab_size": 504, "tokenizer_sha256": "ab" * 32,
            "splits": {split: {"documents": 3, "tokens": 100,
                               "shards": [{"file": "00000.arrow", "tokens": 100,
                                           "sha256": "cd" * 32}]}
                       for split in ("train", "val")}}
STATUS = {"run": True, "rows": {"train": 2000, "dev": 872}}
RECORD = {"stage": "pretrain", "seconds": 1.5, "finished": "2025-01-01T10:00:00+00:00",
          "commit": None, "uncommitted_changes": False, "params": []}
SETTINGS = {"model": {"n_embd": 8}, "pretrain": {"lr": 0.1, "max_steps": 20}, "shards": "ab"}
IMPORTED = {"run": True, "source": "hf", "source_dir": "hf", "model_type": "gpt1",
            "parameters": 1000, "vocab_size": 504, "n_ctx": 32, "n_embd": 32, "n_layer": 2,
            "n_head": 2, "seconds": 1.0}

# (schema, the stage that writes the file, a file of that kind as its stage writes it)
KINDS: dict[str, tuple[type[Record], str, dict[str, Any]]] = {
    "manifest": (PretrainManifest, "tokenize", MANIFEST),
    "manifest-as-read-whole": (Manifest, "tokenize", MANIFEST),
    "manifest-for-lm-eval": (TrainManifest, "tokenize", {"splits": {"train": MANIFEST["splits"][
        "train"]}}),
    "task-status": (TaskStatus, "ingest", STATUS),
    "task-status-not-run": (TaskStatus, "ingest", {"run": False, "reason": "no data"}),
    "pretrain": (PretrainMetrics, "pretrain", PRETRAIN),
    "pretrain-imported": (PretrainMetrics, "pretrain", IMPORTED),
    "lm-eval": (LmEvalMetrics, "lm_eval", LM_EVAL),
    "generated": (Generated, "lm_eval", GENERATED),
    "finetune": (FinetuneMetrics, "finetune@sst2", SST2),
    "finetune-two-splits": (FinetuneMetrics, "finetune@mnli", MNLI),
    "ablation": (AblationMetrics, "ablation@full-sst2", ABLATION["full"]["sst2"]),
    "transfer": (TransferMetrics, "transfer@rte", TRANSFER["rte"]),
    "zero-shot": (ZeroShotMetrics, "zero_shot@cola", ZERO_SHOT["cola"]),
    "zero-shot-not-run": (ZeroShotMetrics, "zero_shot@race", ZERO_SHOT["race"]),
    "stage-record": (StageRecord, "pretrain", RECORD),
    "not-run-folder": (Ran, "pretrain_control@lstm", NOT_RUN),
    "run-settings": (RunSettings, "pretrain", SETTINGS),
}


def _write(path: Path, data: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def _damaged(path: Path, stage: str, detail: str) -> str:
    return (f"{path}: damaged, not the JSON stage {stage} writes ({detail}); run "
            f"`dvc repro --force {stage}` to write it again")


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_as_its_stage_writes_it_reads_back_as_it_is(tmp_path: Path, kind: str) -> None:
    schema, stage, data = KINDS[kind]
    assert read_record(_write(tmp_path / "f.json", data), stage, schema) == data


def test_lm_eval_needs_no_more_of_pretrains_metrics_than_its_losses(tmp_path: Path) -> None:
    for data in (PRETRAIN, IMPORTED, NOT_RUN, {}):  # imported or not run: no losses
        assert read_record(_write(tmp_path / "f.json", data), "pretrain", PretrainLosses) == data
    for text, detail in (("[]", "a list, not a JSON object"),
                         ('{"val_loss": "4.2"}', "val_loss: Input should be a valid number"),
                         ('{"val_loss": 4.2}', "unigram_val_loss: missing beside a val_loss")):
        with pytest.raises(RecordError) as raised:
            read_record(_write(tmp_path / "f.json", text), "pretrain", PretrainLosses)
        assert raised.value.detail == detail


@pytest.mark.parametrize("text", ["{}", "[]", "null", "3", '"text"'])
@pytest.mark.parametrize("kind", KINDS)
def test_another_shape_names_the_file_and_the_stage_to_force(tmp_path: Path, kind: str,
                                                             text: str) -> None:
    schema, stage, _ = KINDS[kind]
    path = _write(tmp_path / "f.json", text)
    with pytest.raises(RecordError) as raised:
        read_record(path, stage, schema)
    message = str(raised.value)
    assert message.startswith(f"{path}: damaged, not the JSON stage {stage} writes (")
    assert message.endswith(f"run `dvc repro --force {stage}` to write it again")
    assert "\n" not in message and is_input_error(raised.value, user_paths=[])


def _edited(data: dict[str, Any], dotted: str, value: object) -> dict[str, Any]:
    """`data` with the key at `dotted` (`splits.train.shards.0.file`) set to `value`, or
    removed where `value` is `...`."""
    edited = copy.deepcopy(data)
    *parents, leaf = dotted.split(".")
    node: Any = edited
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    if value is ...:
        del node[leaf]
    else:
        node[leaf] = value
    return edited


@pytest.mark.parametrize(("kind", "dotted", "value", "detail"), [
    ("manifest", "vocab_size", "504", "vocab_size: Input should be a valid integer"),
    ("manifest", "splits.val", ..., "splits.val: Field required"),
    ("manifest", "splits.train.shards.0.sha256", None,
     "splits.train.shards.0.sha256: Input should be a valid string"),
    ("task-status", "rows", ..., "rows: Field required"),
    ("task-status", "run", "yes", "run: Input should be a valid boolean"),
    ("task-status-not-run", "reason", ..., "reason: Field required"),
    ("pretrain", "val_loss", "low", "val_loss: Input should be a valid number"),
    ("pretrain", "compute", None, "compute: Input should be a valid dictionary"),
    ("pretrain-imported", "n_layer", ..., "n_layer: missing for a model imported from hf"),
    ("pretrain-imported", "source", "gpt2", "source: 'gpt2' is none of"),
    ("lm-eval", "all", [], "all: Input should be a valid dictionary"),
    ("lm-eval", "unigram_val_loss", None, "unigram_val_loss: null beside a val_loss"),
    ("generated", "top_k", ..., "top_k: Field required"),
    ("finetune", "runs.0.epochs.0.dev", {"dev": {"accuracy": "high"}},
     "runs.0.epochs.0.dev.dev.accuracy: Input should be a valid number"),
    ("finetune", "majority_accuracy", "50", "majority_accuracy: '50' is not a number"),
    ("finetune-two-splits", "dev_mismatched", ...,
     "dev_mismatched: missing, though eval_examples names it"),
    ("ablation", "train_1000", ..., "train_1000: missing, though sizes names it"),
    ("ablation", "train_1000.runs", {}, "train_1000.runs: Input should be a valid list"),
    ("transfer", "layers_2", {"k": 2}, "layers_2: runs: missing (or from_ablation)"),
    ("transfer", "n_layer", 10**9, "n_layer: Input should be less than or equal to 1024"),
    ("zero-shot", "trunks.gpt1.scores", [1.0], "trunks.gpt1: 5 steps but 1 scores"),
    ("zero-shot", "train_examples", None, "train_examples: Input should be a valid integer"),
    ("stage-record", "seconds", ..., "seconds: Field required"),
    ("run-settings", "pretrain", [], "pretrain: Input should be a valid dictionary"),
])
def test_a_key_missing_or_of_the_wrong_type_is_named(tmp_path: Path, kind: str, dotted: str,
                                                     value: object, detail: str) -> None:
    schema, stage, data = KINDS[kind]
    path = _write(tmp_path / "f.json", _edited(data, dotted, value))
    with pytest.raises(RecordError) as raised:
        read_record(path, stage, schema)
    assert raised.value.detail.startswith(detail), raised.value.detail
    assert str(raised.value) == _damaged(path, stage, raised.value.detail)


@pytest.mark.parametrize(("data", "detail"), [
    (b'{"dtype": "\xff"}', "'utf-8' codec can't decode byte 0xff"),
    (b"[" * 100_000, "maximum recursion depth exceeded"),
])
def test_bytes_that_are_no_json_text_are_damaged(tmp_path: Path, data: bytes,
                                                 detail: str) -> None:
    path = tmp_path / "manifest.json"
    path.write_bytes(data)
    with pytest.raises(RecordError, match="damaged, not the JSON stage tokenize writes") as raised:
        read_record(path, "tokenize", Manifest)
    assert detail in raised.value.detail


def test_a_folder_in_place_of_the_file_is_damaged(tmp_path: Path) -> None:
    (tmp_path / "manifest.json").mkdir()
    with pytest.raises(RecordError, match=r"manifest.json: damaged, .* \(a folder\)"):
        read_record(tmp_path / "manifest.json", "tokenize", Manifest)


# -- every place such a file is read --------------------------------------------------------


def test_pretraining_reads_the_manifest_checked(tmp_path: Path) -> None:
    from gpt1.jobs.pretrain import read_manifest

    _write(tmp_path / "manifest.json", "null")
    with pytest.raises(RecordError, match=r"manifest.json: damaged, not the JSON stage "
                                          r"tokenize writes \(null, not a JSON object\)"):
        read_manifest(tmp_path, 504, tmp_path / "tokenizer.json")
    _write(tmp_path / "manifest.json", MANIFEST)
    assert read_manifest(tmp_path, 504, tmp_path / "tokenizer.json", PretrainManifest) == (
        json.dumps(MANIFEST), MANIFEST)
    _write(tmp_path / "manifest.json", {"vocab_size": 504, "splits": {}})
    with pytest.raises(RecordError, match=r"\(splits.train: Field required \(and 1 more\)\)"):
        read_manifest(tmp_path, 504, tmp_path / "tokenizer.json", PretrainManifest)


def test_lm_eval_reads_the_manifest_checked(tmp_path: Path) -> None:
    from gpt1.training.heldout import train_unigram

    _write(tmp_path / "manifest.json", {"splits": {"train": {}}})
    with pytest.raises(RecordError, match=r"\(splits.train.shards: Field required\); run"):
        train_unigram(tmp_path, 504)


@pytest.mark.parametrize("stage", ["finetune", "ablation", "transfer", "zero_shot"])
@pytest.mark.parametrize("text", ["{}", "[]", "null", '{"run": true}'])
def test_every_stage_reads_a_task_status_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 stage: str, text: str) -> None:
    import importlib

    params = load_params(REPO / "params.yaml")
    monkeypatch.chdir(tmp_path)
    status = _write(Path("data/raw/tasks/sst2/status.json"), text)
    module = importlib.import_module(f"tasks.{stage}")
    with pytest.raises(RecordError) as raised:
        if stage == "ablation":
            module.run(params, "full", "sst2")
        else:
            module.run(params, "sst2")
    assert str(raised.value).startswith(f"{status}: damaged, not the JSON stage ingest writes (")
    assert not Path("metrics").exists()  # nothing written


def test_an_output_folders_status_is_checked(tmp_path: Path) -> None:
    _write(tmp_path / "model" / "status.json", {"run": False})
    with pytest.raises(RecordError, match=r"status.json: damaged, not the JSON stage pretrain_"
                                          r"control@lstm writes \(reason: Field required\)"):
        not_run_reason(tmp_path / "model", "pretrain_control@lstm")
    _write(tmp_path / "model" / "status.json", {"run": True})
    assert not_run_reason(tmp_path / "model", "pretrain_control@lstm") is None


@pytest.mark.parametrize(("rel", "stage"), [
    ("metrics/pretrain.json", "pretrain"),
    ("metrics/pretrain_lstm.json", "pretrain_control@lstm"),
    ("metrics/lm_eval.json", "lm_eval"),
    ("artifacts/lm_eval/generated.json", "lm_eval"),
    ("metrics/finetune/mnli.json", "finetune@mnli"),
    ("metrics/ablation/no_aux/sst2.json", "ablation@no_aux-sst2"),
    ("metrics/transfer/rte.json", "transfer@rte"),
    ("metrics/zero_shot/cola.json", "zero_shot@cola"),
    ("metrics/stages/finetune/sst2.json", "finetune@sst2"),
])
@pytest.mark.parametrize("text", ["{}", "[]", "null"])
def test_the_report_reads_every_file_checked(tmp_path: Path, rel: str, stage: str,
                                             text: str) -> None:
    write_run(tmp_path)
    read_run(PARAMS, FILES, tmp_path)  # whole, it reads
    _write(tmp_path / rel, text)
    with pytest.raises(RecordError) as raised:
        read_run(PARAMS, FILES, tmp_path)
    assert str(raised.value).startswith(
        f"{tmp_path / rel}: damaged, not the JSON stage {stage} writes (")


def test_a_transfer_end_must_find_its_table_5_cell(tmp_path: Path) -> None:
    transfer = copy.deepcopy(TRANSFER)
    transfer["rte"]["layers_4"] = {"k": 4, "from_ablation": "full"}
    ablation = {"full": {"rte": {**ABLATION["full"]["sst2"], "task": "rte"}}}
    ablation["full"]["rte"]["train_all"]["max_train_examples"] = None
    check_transfer_links(transfer, ablation, FILES, tmp_path)  # train_all: the transfer's size
    del ablation["full"]["rte"]
    with pytest.raises(InputError, match=r"metrics/transfer/rte.json: layers_4 takes its runs "
                                         r"from ablation@full-rte, whose metrics file holds "
                                         r"no one train size of max_train_examples None; run "
                                         r"`dvc repro --force transfer@rte`"):
        check_transfer_links(transfer, ablation, FILES, tmp_path)
    ablation["full"]["rte"] = {"variant": "full", "task": "rte", **NOT_RUN}
    with pytest.raises(InputError, match="layers_4 takes its runs from ablation@full-rte"):
        check_transfer_links(transfer, ablation, FILES, tmp_path)


def test_a_damaged_run_json_leaves_its_checkpoints_of_unknown_settings(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Another run's folder: forcing pretrain would not write its run.json again, so it is
    kept, as a run of unknown settings that `extend` never continues, with a warning."""
    import torch

    from gpt1.training.checkpoint import RUN_FILE, CheckpointRuns

    runs = CheckpointRuns(tmp_path)
    other = runs.store(SETTINGS, keep=2)
    other.save(3, {"model": {"w": torch.zeros(2)}})
    current = runs.store({**SETTINGS, "shards": "cd"}, keep=2)
    for text in ("[]", "{}", '{"pretrain": {"max_steps": "20"}}', '{"pretrain": '):
        (other.directory / RUN_FILE).write_text(text)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="gpt1.training.checkpoint"):
            [found] = runs.others(current)
        assert found.settings is None and found.store.directory == other.directory
        assert f"{other.directory / RUN_FILE}: damaged (" in caplog.text
    shutil.rmtree(tmp_path)


def test_a_curve_is_a_tsv_dvc_plots_reads(tmp_path: Path) -> None:
    """dvc.yaml plots it with x: epoch, y: dev: a header row, then one row per epoch."""
    write_curve(tmp_path / "sst2.tsv", [(1, 77.0, 2.3917), (2, 85.0, 1.476)])
    with (tmp_path / "sst2.tsv").open(newline="") as fh:
        assert list(csv.DictReader(fh, delimiter="\t")) == [
            {"epoch": "1", "dev": "77.0", "train_loss": "2.3917"},
            {"epoch": "2", "dev": "85.0", "train_loss": "1.476"}]
    write_curve(tmp_path / "not_run.tsv", [])  # a stage with nothing to do: the header alone
    assert (tmp_path / "not_run.tsv").read_text() == "epoch\tdev\ttrain_loss\n"
