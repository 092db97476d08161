"""The pretraining job of stages `pretrain` and `pretrain_control@lstm`: from the params, the
token shards and the tokenizer to a pretrained model (GPT-1, or the paper's recurrent control of
Table 5) and its metrics; or, for `pretrain.source` openai or hf, the released model imported
instead.

The run's checkpoints are filed under a fingerprint of everything its trajectory depends on
(`run_settings`): a run stopped and started again resumes, and one under other settings starts
afresh (or, with `pretrain.extend`, continues the shorter run it extends)."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import shutil
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from gpt1.atomic import atomic_dir
from gpt1.config import SOURCE_TITLES, Params, PretrainParams
from gpt1.corpus.shards import read_verified_split, unigram_loss
from gpt1.corpus.tokenizer import GPT1Tokenizer
from gpt1.errors import InputError
from gpt1.interop.source import import_pretrained
from gpt1.model.lstm import LSTMConfig, width_for_parameters
from gpt1.model.registry import build_trunk, save_model
from gpt1.model.transformer import GPT1Config
from gpt1.model.trunk import TrunkConfig
from gpt1.records import Manifest, PretrainManifest, Record, read_record
from gpt1.training.checkpoint import CheckpointRuns, CheckpointStore, StopRequested
from gpt1.training.device import resolve_compile, resolve_device
from gpt1.training.distributed import process_group
from gpt1.training.pretrain_loop import MetricsCallback, PretrainResult, pretrain
from gpt1.training.resources import FP32, check_disk, check_memory

log = logging.getLogger(__name__)

UNIGRAM_MARGIN = 0.1  # nats: closer than this to the unigram loss, context is barely used
# Knobs that change neither the data nor the arithmetic of training: a checkpoint written under
# other values of these is still resumed from. (A run trains only when source is train.)
NOT_IN_FINGERPRINT = {"log_every", "checkpoint_every", "keep_checkpoints", "keep_other_runs",
                      "peak_tflops", "source", "source_dir"}
# What `pretrain.extend` lets differ between a run and the shorter one it continues.
BUDGET = ("max_steps", "extend")

# Opens the log of the training curves in a folder (the stage's dvclive, say) for the run, and
# gives the callback that logs each step's values; only rank 0 opens it.
MetricsLog = Callable[[Path], AbstractContextManager[MetricsCallback]]


@dataclass(frozen=True)
class PretrainOutputs:
    """Where a pretraining job writes (its metrics file aside: the stage writes what it returns)."""

    model: Path  # the pretrained model and its tokenizer
    checkpoints: Path  # the runs' checkpoints, one folder per fingerprint
    live: Path  # the training curves, by the stage's `MetricsLog`
    snapshots: str  # the folder in `model` for the snapshots of `pretrain.snapshots`


def model_config(params: Params, vocab_size: int) -> GPT1Config:
    m = params.model
    return GPT1Config(vocab_size=vocab_size, n_ctx=m.n_ctx, n_embd=m.n_embd, n_layer=m.n_layer,
                      n_head=m.n_head, embd_pdrop=m.dropout, attn_pdrop=m.dropout,
                      resid_pdrop=m.dropout)


def lstm_config(params: Params, vocab_size: int) -> LSTMConfig:
    """The LSTM of `analysis.lstm`: `n_embd` units, or else the most whose parameter count is
    within the Transformer's; the Transformer's context and dropout."""
    m = params.model
    units = params.analysis.lstm.n_embd or width_for_parameters(
        model_config(params, vocab_size).parameter_count(), vocab_size)
    return LSTMConfig(vocab_size=vocab_size, n_ctx=m.n_ctx, n_embd=units, embd_pdrop=m.dropout,
                      resid_pdrop=m.dropout)


def trunk_config(params: Params, trunk: str, vocab_size: int) -> TrunkConfig:
    return lstm_config(params, vocab_size) if trunk == "lstm" else model_config(params, vocab_size)


def training_knobs(params: Params, trunk: str) -> PretrainParams:
    """`pretrain`, with the LSTM's own learning rate where `analysis.lstm.lr` sets one."""
    if trunk == "lstm" and params.analysis.lstm.lr is not None:
        return params.pretrain.model_copy(update={"lr": params.analysis.lstm.lr})
    return params.pretrain


def run_settings(params: Params, manifest_text: str, trunk: str = "gpt1") -> dict[str, Any]:
    """Everything a pretraining trajectory depends on: model and training knobs and the exact
    token shards (their manifest holds each shard's sha256). Its digest names the run. It holds
    whether the step is compiled, not how that is asked for (`auto` on the CPU is eager)."""
    knobs = training_knobs(params, trunk)
    compiled = resolve_compile(knobs.compile, resolve_device(knobs.device))
    settings = {"model": params.model.model_dump(),
                "pretrain": {**knobs.model_dump(exclude=NOT_IN_FINGERPRINT),
                             "compile": compiled},
                "shards": hashlib.sha256(manifest_text.encode()).hexdigest()}
    if trunk != "gpt1":
        settings["trunk"] = {"model_type": trunk, **params.analysis.lstm.model_dump()}
    return settings


def _without_budget(settings: dict[str, Any]) -> dict[str, Any]:
    return {**settings, "pretrain": {k: v for k, v in settings["pretrain"].items()
                                     if k not in BUDGET}}


def run_to_extend(runs: CheckpointRuns, ours: CheckpointStore) -> CheckpointStore | None:
    """The run `pretrain.extend` continues: of the runs whose settings differ from ours only in
    a smaller max_steps, the one that got furthest."""
    assert ours.settings is not None
    same = _without_budget(ours.settings)
    shorter = [run.store for run in runs.others(ours)
               if run.settings is not None and _without_budget(run.settings) == same
               and run.settings["pretrain"]["max_steps"] < ours.settings["pretrain"]["max_steps"]]
    return max(shorter, key=CheckpointStore.latest_step, default=None)


def check_resources(params: Params, cfg: TrunkConfig, checkpoints: Path) -> None:
    """Fail before allocating or training when the model cannot fit in memory, or its
    checkpoints, snapshots and outputs (with DVC's cached copies) cannot fit on disk."""
    if isinstance(cfg, GPT1Config):  # the activation estimate is GPT-1's
        check_memory(cfg, params.pretrain.batch_size, resolve_device(params.pretrain.device),
                     "model and pretrain.batch_size")
    weights = cfg.parameter_count() * FP32
    checkpoint = 3 * weights  # the weights and Adam's two moments
    snapshots = len([s for s in params.pretrain.snapshots if s <= params.pretrain.max_steps])
    models = 2 * (1 + snapshots)
    need = (params.pretrain.keep_checkpoints + 1) * checkpoint + models * weights
    check_disk(checkpoints, need, f"pretrain.keep_checkpoints + 1 = "
               f"{params.pretrain.keep_checkpoints + 1} checkpoints, {snapshots} snapshots and "
               "the model")


def copy_snapshots(checkpoints: CheckpointStore, snapshots: list[int], max_steps: int,
                   out: Path) -> None:
    """The run's snapshots into folder `out` (a model's snapshots folder); a step asked for but
    not kept (passed before it was asked for, in the run this one extends) is named in a
    warning."""
    kept = checkpoints.snapshots()
    missing = [step for step in snapshots if step not in kept and step <= max_steps]
    if missing:
        log.warning("no snapshot of steps %s in %s: they were passed before they were asked "
                    "for (pretrain.extend continues another run's checkpoints)", missing,
                    checkpoints.directory)
    for step in snapshots:
        if step in kept:
            shutil.copytree(kept[step], out / kept[step].name)


def read_manifest(shards: Path, vocab_size: int, tokenizer_path: Path,
                  schema: type[Record] = Manifest) -> tuple[str, dict[str, Any]]:
    """The manifest stage tokenize wrote beside the shards in `shards`: its text (the run's
    fingerprint hashes it) and its content, of `schema`'s shape (what the caller reads of it:
    `PretrainManifest` for pretraining), checked against the `vocab_size` of the tokenizer at
    `tokenizer_path`."""
    path = shards / "manifest.json"
    manifest = read_record(path, "tokenize", schema)
    text = path.read_text(encoding="utf-8", errors="replace")  # parsed above: UTF-8 as written
    if manifest["vocab_size"] != vocab_size:
        raise InputError(f"{path}: vocab_size {manifest['vocab_size']} does not match "
                         f"{tokenizer_path} ({vocab_size}); re-run tokenize")
    return text, manifest


def _no_training_outputs(outputs: PretrainOutputs) -> None:
    """The folders dvc.yaml declares that only training fills: the live logs, the checkpoints."""
    outputs.live.mkdir(parents=True, exist_ok=True)
    outputs.checkpoints.mkdir(parents=True, exist_ok=True)


def import_source(params: Params, outputs: PretrainOutputs) -> dict[str, Any]:
    """`pretrain.source` openai or hf: the released model and its tokenizer as the pretrained
    model, in place of pretraining; the metrics."""
    pretrain = params.pretrain
    started = time.perf_counter()
    imported = import_pretrained(pretrain.source, Path(pretrain.source_dir), params.model,
                                 pretrain.seed)
    cfg = imported.model.config
    with atomic_dir(outputs.model) as tmp:
        save_model(imported.model, tmp)
        imported.tokenizer.save(str(tmp / "tokenizer.json"))
    _no_training_outputs(outputs)
    metrics = {"run": True, "source": pretrain.source, "source_dir": pretrain.source_dir,
               "model_type": cfg.model_type, "parameters": imported.model.num_parameters(),
               "vocab_size": cfg.vocab_size, "n_ctx": cfg.n_ctx, "n_embd": cfg.n_embd,
               "n_layer": cfg.n_layer, "n_head": cfg.n_head,
               "seconds": round(time.perf_counter() - started, 1)}
    log.info("imported %s from %s: %d layers x %d, %d heads, %d tokens, n_ctx %d (%s "
             "parameters)", SOURCE_TITLES[pretrain.source], pretrain.source_dir, cfg.n_layer,
             cfg.n_embd, cfg.n_head, cfg.vocab_size, cfg.n_ctx,
             f"{metrics['parameters']:,}")
    return metrics


def unreached_snapshots(knobs: PretrainParams) -> list[int]:
    """The steps of `snapshots` a run of `max_steps` never reaches."""
    return [step for step in knobs.snapshots if step > knobs.max_steps]


def pretrain_metrics(model_type: str, parameters: int, result: PretrainResult,
                     unigram: float) -> dict[str, Any]:
    """The metrics file of a pretraining run: `result`, beside the loss of token frequencies
    alone (`unigram`)."""
    return {
        "run": True,
        "model_type": model_type,
        "steps": result.steps,
        "tokens": result.tokens,
        "train_loss": round(result.train_loss, 4),
        "val_loss": round(result.val_loss, 4),
        "val_perplexity": round(result.val_perplexity, 2),
        "unigram_val_loss": round(unigram, 4),
        "parameters": parameters,
        "seconds": round(result.seconds, 1),
        "startup_seconds": round(result.startup_seconds, 1),
        "tokens_per_second": round(result.tokens_per_second, 1),
        "mfu": round(result.mfu, 4),
        "peak_tflops": round(result.peak_flops / 1e12, 3),
        "compute": result.compute,
    }


def learned_little(val_loss: float, unigram: float) -> bool:
    """Whether a validation loss is within `UNIGRAM_MARGIN` of (or above) the loss of token
    frequencies alone: the model barely uses its context."""
    return val_loss > unigram - UNIGRAM_MARGIN


def pretrain_job(params: Params, trunk: str, outputs: PretrainOutputs, shards: Path, bpe: Path,
                 metrics_log: MetricsLog) -> dict[str, Any] | None:
    """Pretrain trunk `trunk` (gpt1 or lstm) on the token shards in `shards` (tokenize's) with
    the tokenizer in `bpe`, or import the released model of `pretrain.source`; write the model
    to `outputs`. Returns the metrics file's content, or None in a process other than rank 0
    under torchrun, which writes nothing.

    The run resumes from its own checkpoints (or, with `pretrain.extend`, continues a shorter
    run); `metrics_log(outputs.live)` is opened on rank 0 for the training curves. Stopped by
    SIGTERM or SIGINT, it raises `StopRequested` after the checkpoint."""
    if params.pretrain.released:
        return import_source(params, outputs)
    tokenizer_path = bpe / "tokenizer.json"
    tokenizer = GPT1Tokenizer.load(tokenizer_path)
    manifest_text, manifest = read_manifest(shards, tokenizer.vocab_size, tokenizer_path,
                                            PretrainManifest)
    splits = manifest["splits"]
    train = read_verified_split(shards / "train", splits["train"]["shards"])
    val = read_verified_split(shards / "val", splits["val"]["shards"])
    cfg = trunk_config(params, trunk, tokenizer.vocab_size)
    knobs = training_knobs(params, trunk)
    unreached = unreached_snapshots(knobs)
    if unreached:
        log.warning("pretrain.snapshots: steps %s come after max_steps (%d) and are not kept",
                    unreached, knobs.max_steps)
    check_resources(params, cfg, outputs.checkpoints)
    torch.manual_seed(params.pretrain.seed)
    model = build_trunk(cfg)
    runs = CheckpointRuns(outputs.checkpoints)
    checkpoints = runs.store(run_settings(params, manifest_text, trunk),
                             keep=params.pretrain.keep_checkpoints)
    # under torchrun every process trains its share of each batch; rank 0 alone writes
    with process_group(params.pretrain.device) as group, \
            (metrics_log(outputs.live) if group.is_main
             else contextlib.nullcontext(None)) as on_metrics:
        if group.is_main:
            runs.set_aside(checkpoints, params.pretrain.keep_other_runs)
        # after rank 0 has filed and pruned the folders, all continue the same run
        extend = group.from_main(run_to_extend(runs, checkpoints) if params.pretrain.extend
                                 and group.is_main else None)
        try:
            result = pretrain(model, train, val, knobs, on_metrics, checkpoints, group, extend)
        except StopRequested as stop:
            if group.is_main:
                log.warning("pretraining stopped: %s; run the stage again to resume from it",
                            stop)
            raise
    if not group.is_main:
        return None
    unigram = unigram_loss(train, val, tokenizer.vocab_size)
    with atomic_dir(outputs.model) as tmp:
        save_model(model.cpu(), tmp)
        shutil.copy(tokenizer_path, tmp / "tokenizer.json")
        copy_snapshots(checkpoints, params.pretrain.snapshots, knobs.max_steps,
                       tmp / outputs.snapshots)
    metrics = pretrain_metrics(cfg.model_type, model.num_parameters(), result, unigram)
    log.info("val loss %.4f (perplexity %.1f) after %d steps; token frequencies alone: %.4f",
             result.val_loss, result.val_perplexity, result.steps, unigram)
    if learned_little(result.val_loss, unigram):
        log.warning("the model has learned little beyond token frequencies (val loss %.4f, "
                    "unigram %.4f): pretrain for more steps (pretrain.max_steps)",
                    result.val_loss, unigram)
    return metrics
