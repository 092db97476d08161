"""The files a run's report reads: every stage's metrics file, the stage records, the pretraining
curves (dvclive) and the text the pretrained model wrote, as they lie under a checkout."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from gpt1.config import Params
from gpt1.dag import resolve
from gpt1.errors import InputError
from gpt1.records import (
    AblationMetrics,
    FinetuneMetrics,
    Generated,
    LmEvalMetrics,
    PretrainMetrics,
    Record,
    StageRecord,
    TransferMetrics,
    ZeroShotMetrics,
    read_record,
)

Result = dict[str, Any]  # one metrics file, as read

CURVES = ("train", "val")  # dvclive's loss series: plots/metrics/<split>/loss.tsv


@dataclass(frozen=True)
class RunFiles:
    """Where a checkout's stages write what the report reads (tasks.paths.RUN_FILES), relative
    to its root."""

    pretrain: Path  # metrics/pretrain.json
    pretrain_lstm: Path  # metrics/pretrain_lstm.json
    pretrain_live: Path  # dvclive/pretrain
    lm_eval: Path  # metrics/lm_eval.json
    generated: Path  # artifacts/lm_eval/generated.json
    finetune: Path  # metrics/finetune/<task>.json
    ablation: Path  # metrics/ablation/<variant>/<task>.json
    transfer: Path  # metrics/transfer/<task>.json
    zero_shot: Path  # metrics/zero_shot/<task>.json
    stages: Path  # metrics/stages/<stage>.json, <stage>/<key>.json
    pretrain_model: Path  # artifacts/pretrain
    finetune_models: Path  # artifacts/finetune/<task>


@dataclass(frozen=True)
class RunData:
    """Every file of a run the report reads, as read: JSON as dicts, in the order params names
    the tasks and variants."""

    pretrain: Result
    pretrain_lstm: Result | None  # None where the file is absent
    lm_eval: Result
    finetune: dict[str, Result]  # task -> metrics/finetune/<task>.json
    ablation: dict[str, dict[str, Result]]  # variant -> task -> metrics/ablation/<v>/<task>.json
    transfer: dict[str, Result]  # task -> metrics/transfer/<task>.json
    zero_shot: dict[str, Result]  # task -> metrics/zero_shot/<task>.json
    stages: list[Result]  # each stage record found (tasks.stage.write_stage_record)
    curves: pl.DataFrame  # the pretraining loss by step: split (train, val), step, loss
    generated: Result | None  # the text the pretrained model wrote; None where absent


def read_json(path: Path, stage: str, schema: type[Record]) -> Result:
    """A metrics file of `schema`'s shape, naming the stage that writes it where it is absent
    or damaged."""
    return read_record(path, stage, schema)


def _optional(path: Path, stage: str, schema: type[Record]) -> Result | None:
    return read_json(path, stage, schema) if path.exists() else None


def read_curves(live: Path) -> pl.DataFrame:
    """The train and val loss dvclive logged by step (none for an imported model)."""
    frames = []
    for split in CURVES:
        tsv = live / "plots" / "metrics" / split / "loss.tsv"
        if tsv.is_file():
            frames.append(pl.read_csv(tsv, separator="\t", columns=["step", "loss"],
                                      schema_overrides={"step": pl.Int64, "loss": pl.Float64})
                          .select(pl.lit(split).alias("split"), "step", "loss"))
    empty = pl.DataFrame(schema={"split": pl.Utf8, "step": pl.Int64, "loss": pl.Float64})
    return pl.concat([empty, *frames]) if frames else empty


def read_stage_records(folder: Path) -> list[Result]:
    """Every stage record under `folder`, oldest first."""
    records = [read_record(p, p.stem if p.parent == folder else f"{p.parent.name}@{p.stem}",
                           StageRecord) for p in sorted(folder.rglob("*.json"))]
    return sorted(records, key=lambda r: r.get("finished") or "")


def _read_stage(path: Path, stage: str, schema: type[Record], not_run: dict[str, str]) -> Result:
    """The metrics file at `path` of the stage at address `stage`, or, for a stage params make
    no stage of (`not_run`: gpt1.dag), what a stage with nothing to do would record: why not."""
    if stage in not_run:
        return {"run": False, "reason": not_run[stage]}
    return read_json(path, stage, schema)


def read_finetune(params: Params, files: RunFiles, root: Path = Path(),
                  not_run: dict[str, str] | None = None) -> dict[str, Result]:
    """Every registry task's metrics/finetune/<task>.json under `root` (why not, for a task
    that is not fine-tuned: `not_run`, gpt1.dag's, resolved here when not given)."""
    not_run = resolve(params, root).not_run if not_run is None else not_run
    return {task: _read_stage(root / files.finetune / f"{task}.json", f"finetune@{task}",
                              FinetuneMetrics, not_run)
            for task in params.tasks}


def check_transfer_links(transfer: dict[str, Result], ablation: dict[str, dict[str, Result]],
                         files: RunFiles, root: Path = Path()) -> None:
    """Each end of a transfer file that points to a Table 5 cell (`from_ablation`) finds that
    cell's runs at the transfer's train size; InputError, naming the file, where it does not
    (a file older than the cell's, or edited)."""
    for task, result in transfer.items():
        if not result["run"]:
            continue
        for k in range(result["n_layer"] + 1):
            variant = (result.get(f"layers_{k}") or {}).get("from_ablation")
            if variant is None:
                continue
            cell = ablation.get(variant, {}).get(task)
            size = result["max_train_examples"]
            if cell is None or not cell["run"] or sum(
                    cell[key]["max_train_examples"] == size for key in cell["sizes"]) != 1:
                raise InputError(
                    f"{root / files.transfer / f'{task}.json'}: layers_{k} takes its runs from "
                    f"ablation@{variant}-{task}, whose metrics file holds no one train size of "
                    f"max_train_examples {size}; run `dvc repro --force transfer@{task}` to "
                    "write it again")


def read_run(params: Params, files: RunFiles, root: Path = Path()) -> RunData:
    """The files under `root` of every stage params declares; FileNotFoundError, naming the
    stage to run, for a metrics file that is absent; InputError, naming the file and the stage
    to run again, for one that is damaged."""
    analysis, dag = params.analysis, resolve(params, root)
    pretrain = read_json(root / files.pretrain, "pretrain", PretrainMetrics)
    pretrain_lstm = (read_json(root / files.pretrain_lstm, "pretrain_control@lstm",
                               PretrainMetrics) if dag.control else None)
    lm_eval = read_json(root / files.lm_eval, "lm_eval", LmEvalMetrics)
    finetune = read_finetune(params, files, root, dag.not_run)
    ablation = {variant: {task: _read_stage(root / files.ablation / variant / f"{task}.json",
                                            f"ablation@{variant}-{task}", AblationMetrics,
                                            dag.not_run)
                          for task in analysis.ablation.tasks}
                for variant in analysis.ablation.variants}
    transfer = {task: _read_stage(root / files.transfer / f"{task}.json", f"transfer@{task}",
                                  TransferMetrics, dag.not_run)
                for task in analysis.transfer.tasks}
    check_transfer_links(transfer, ablation, files, root)
    return RunData(
        pretrain=pretrain, pretrain_lstm=pretrain_lstm, lm_eval=lm_eval, finetune=finetune,
        ablation=ablation, transfer=transfer,
        zero_shot={task: _read_stage(root / files.zero_shot / f"{task}.json",
                                     f"zero_shot@{task}", ZeroShotMetrics, dag.not_run)
                   for task in analysis.zero_shot.tasks},
        stages=read_stage_records(root / files.stages),
        curves=read_curves(root / files.pretrain_live),
        generated=_optional(root / files.generated, "lm_eval", Generated),
    )
