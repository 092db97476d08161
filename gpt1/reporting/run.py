"""The run as the report reads it: every metrics file of the run (as `gpt1.reporting.files`
reads them) in one long polars table, one figure a row, with what did not run (`Results`) and its
aggregation over seeds; `Run`, what every section reads; and `RunFacts`, what ran.

A row's columns say where its figure comes from: `stage`; the `task`; the `variant` (an
ablation's variant, a zero-shot trunk, or a baseline: `majority` class, `unigram` frequencies,
`chance`); the `train_size` fine-tuned on; the pretrained `layers` transferred; the pretraining
`step` of a zero-shot snapshot; the `seed` and `epoch` of a fine-tuning run; the `split` scored;
the `metric`; its `value`. A column that does not apply is null."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import polars as pl

from gpt1.config import TaskParams
from gpt1.reporting.files import Result, RunData, RunFiles

# --- the long table --------------------------------------------------------------------------

SCHEMA: dict[str, Any] = {"stage": pl.Utf8, "task": pl.Utf8, "variant": pl.Utf8,
                          "train_size": pl.Int64, "layers": pl.Int64, "step": pl.Int64,
                          "seed": pl.Int64, "epoch": pl.Int64, "split": pl.Utf8,
                          "metric": pl.Utf8, "value": pl.Float64}
SKIPPED_SCHEMA: dict[str, Any] = {"stage": pl.Utf8, "task": pl.Utf8, "variant": pl.Utf8,
                                  "reason": pl.Utf8}
# what identifies a figure once the seeds are aggregated
KEYS = ["stage", "task", "variant", "train_size", "layers", "step", "split", "metric"]

PRETRAIN_FACTS = ("steps", "tokens", "parameters", "seconds", "startup_seconds",
                  "tokens_per_second", "mfu")
HELDOUT_FIGURES = ("tokens", "words", "loss", "perplexity", "word_loss", "word_perplexity")

Row = dict[str, Any]


def _row(**cells: Any) -> Row:
    return {column: cells.get(column) for column in SCHEMA}


def pretrain_rows(stage: str, result: Result | None) -> Iterator[Row]:
    """A pretraining stage's figures: train and val loss, val perplexity, the unigram baseline
    (variant `unigram`), and its facts (steps, tokens, parameters, seconds, the first steps'
    seconds, tokens/s, MFU)."""
    if result is None or not result["run"]:
        return
    for split, metric, key in (("train", "loss", "train_loss"), ("val", "loss", "val_loss"),
                               ("val", "perplexity", "val_perplexity")):
        if result.get(key) is not None:
            yield _row(stage=stage, split=split, metric=metric, value=result[key])
    if result.get("unigram_val_loss") is not None:
        yield _row(stage=stage, variant="unigram", split="val", metric="loss",
                   value=result["unigram_val_loss"])
    for fact in PRETRAIN_FACTS:
        if result.get(fact) is not None:
            yield _row(stage=stage, metric=fact, value=result[fact])


def lm_eval_rows(result: Result) -> Iterator[Row]:
    """The held-out text's figures per file (split: its path under the data root, or `all`),
    with the unigram baseline's loss (variant `unigram`)."""
    for split, figures in [*result["files"].items(), ("all", result["all"])]:
        for metric in HELDOUT_FIGURES:
            yield _row(stage="lm_eval", split=split, metric=metric, value=figures[metric])
        if figures.get("unigram_loss") is not None:
            yield _row(stage="lm_eval", variant="unigram", split=split, metric="loss",
                       value=figures["unigram_loss"])


def run_rows(runs: list[Result], **keys: Any) -> Iterator[Row]:
    """Fine-tuning runs, one per seed (a metrics file's `runs`): every dev figure after every
    epoch, and the training loss (split `train`, metric `loss`)."""
    for run in runs:
        for epoch in run["epochs"]:
            at = {**keys, "seed": run["seed"], "epoch": epoch["epoch"]}
            yield _row(**at, split="train", metric="loss", value=epoch["train_loss"])
            for split, figures in epoch["dev"].items():
                for metric, value in figures.items():
                    yield _row(**at, split=split, metric=metric, value=value)


def finetune_rows(task: str, result: Result) -> Iterator[Row]:
    """A finetune@<task> file: its runs, and the majority-class score of each eval split
    (variant `majority`) where the file has one."""
    train_size = result["train_examples"]
    yield from run_rows(result["runs"], stage="finetune", task=task, train_size=train_size)
    for split in result["eval_examples"]:  # the eval splits, in order
        figures = result if split == result["split"] else result[split]
        for metric in result["metrics"]:
            if f"majority_{metric}" in figures:
                yield _row(stage="finetune", task=task, variant="majority",
                           train_size=train_size, split=split, metric=metric,
                           value=figures[f"majority_{metric}"])


def ablation_rows(variant: str, task: str, result: Result) -> Iterator[Row]:
    for key in result["sizes"]:
        size = result[key]
        yield from run_rows(size["runs"], stage="ablation", task=task, variant=variant,
                            train_size=size["train_examples"])


def transfer_rows(task: str, result: Result,
                  ablation: dict[str, dict[str, Result]]) -> Iterator[Row]:
    """Each k's runs; an end that Table 5's cell fine-tuned (`from_ablation`: the variant) has
    the runs of that `ablation` file (variant -> task -> file) at the transfer's train size."""
    for k in range(result["n_layer"] + 1):
        if (layer := result.get(f"layers_{k}")) is None:
            continue
        if (variant := layer.get("from_ablation")) is not None:
            cell = ablation[variant][task]
            (runs,) = [cell[key]["runs"] for key in cell["sizes"]
                       if cell[key]["max_train_examples"] == result["max_train_examples"]]
        else:
            runs = layer["runs"]
        yield from run_rows(runs, stage="transfer", task=task, layers=k,
                            train_size=result["train_examples"])


def zero_shot_rows(task: str, result: Result) -> Iterator[Row]:
    """Each trunk's score (variant: the trunk) at each pretraining snapshot (step), and the
    task's chance level (variant `chance`)."""
    at = {"stage": "zero_shot", "task": task, "split": result["split"],
          "metric": result["metric"]}
    yield _row(**at, variant="chance", value=result["chance"])
    for trunk, curve in result["trunks"].items():
        for step, score in zip(curve["steps"], curve["scores"], strict=True):
            yield _row(**at, variant=trunk, step=step, value=score)


@dataclass(frozen=True)
class Results:
    """A run's figures: `values`, the long table (SCHEMA), and `skipped`, what did not run
    (stage, task, variant, reason)."""

    values: pl.DataFrame
    skipped: pl.DataFrame

    def over_seeds(self) -> pl.DataFrame:
        """`over_seeds(self.values)`."""
        return over_seeds(self.values)


def results(data: RunData) -> Results:
    """Every metrics file of `data` in the long table, and what did not run."""
    return collect(pretrain=data.pretrain, pretrain_lstm=data.pretrain_lstm,
                   lm_eval=data.lm_eval, finetune=data.finetune, ablation=data.ablation,
                   transfer=data.transfer, zero_shot=data.zero_shot)


def collect(pretrain: Result | None = None, pretrain_lstm: Result | None = None,
            lm_eval: Result | None = None, finetune: dict[str, Result] | None = None,
            ablation: dict[str, dict[str, Result]] | None = None,
            transfer: dict[str, Result] | None = None,
            zero_shot: dict[str, Result] | None = None) -> Results:
    """The long table of the metrics files given (task -> file; variant -> task -> file for the
    ablations), and what did not run."""
    rows: list[Row] = [*pretrain_rows("pretrain", pretrain),
                       *pretrain_rows("pretrain_lstm", pretrain_lstm)]
    skipped: list[Row] = []

    def take(result: Result, rows_of: Iterator[Row], stage: str, task: str | None = None,
             variant: str | None = None) -> None:
        if result["run"]:
            rows.extend(rows_of)
        else:
            skipped.append({"stage": stage, "task": task, "variant": variant,
                            "reason": result["reason"]})

    if lm_eval is not None:
        take(lm_eval, lm_eval_rows(lm_eval), "lm_eval")
    for task, result in (finetune or {}).items():
        take(result, finetune_rows(task, result), "finetune", task)
    for variant, files in (ablation or {}).items():
        for task, result in files.items():
            take(result, ablation_rows(variant, task, result), "ablation", task, variant)
    for task, result in (transfer or {}).items():
        take(result, transfer_rows(task, result, ablation or {}), "transfer", task)
    for task, result in (zero_shot or {}).items():
        take(result, zero_shot_rows(task, result), "zero_shot", task)
    return Results(pl.DataFrame(rows, schema=SCHEMA, orient="row"),
                   pl.DataFrame(skipped, schema=SKIPPED_SCHEMA, orient="row"))


def final_epochs(values: pl.DataFrame) -> pl.DataFrame:
    """Each fine-tuning run's figures after its last epoch (rows without an epoch kept)."""
    last = pl.col("epoch").max().over([*KEYS, "seed"])
    return values.filter(pl.col("epoch").is_null() | (pl.col("epoch") == last))


def over_seeds(values: pl.DataFrame) -> pl.DataFrame:
    """One row per figure (KEYS, in their first order) after the last epoch: its median, min and
    max over seeds, the number of seeds and which."""
    return (final_epochs(values)
            .group_by(KEYS, maintain_order=True)
            .agg(median=pl.col("value").median(), min=pl.col("value").min(),
                 max=pl.col("value").max(), seeds=pl.col("seed").drop_nulls().unique().sort())
            .with_columns(n_seeds=pl.col("seeds").list.len()))


def why_skipped(skipped: pl.DataFrame, stage: str, task: str | None = None,
                variant: str | None = None) -> str | None:
    """Why `stage` (for `task` and `variant`, where given) did not run; None if it ran."""
    rows = skipped.filter(pl.col("stage") == stage)
    if task is not None:
        rows = rows.filter(pl.col("task") == task)
    if variant is not None:
        rows = rows.filter(pl.col("variant") == variant)
    return rows["reason"][0] if rows.height else None


# --- the run as the sections read it ---------------------------------------------------------

@dataclass(frozen=True)
class RunFacts:
    """What ran, for the first screen (`gpt1.jobs.report.run_facts` gathers them)."""

    commit: str | None  # the checkout's, where the report was built
    uncommitted_changes: bool  # tracked files other than params.yaml and dvc.lock differ
    preset: str  # gpt1.reporting.facts.PresetMatch.describe()
    data_root: str  # ingest.root
    sample: bool  # the data root is the bundled synthetic sample
    trained: list[tuple[str, str]]  # gpt1.reporting.facts.where_trained
    stages: pl.DataFrame  # gpt1.reporting.facts.stage_times
    built: str  # when the report was built (UTC)


@dataclass(frozen=True)
class Run:
    """What every section reads: the task registry, the files as read, their long table and its
    aggregation over seeds, the PNGs written (name -> path relative to the report), and where
    the run's files lie (for links)."""

    tasks: dict[str, TaskParams]
    data: RunData
    results: Results
    summary: pl.DataFrame  # results.over_seeds()
    files: RunFiles
    plots: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, tasks: dict[str, TaskParams], data: RunData, files: RunFiles) -> Run:
        found = results(data)
        return cls(tasks, data, found, found.over_seeds(), files)

    def with_plots(self, plots: dict[str, str]) -> Run:
        return replace(self, plots=plots)

    def figure(self, stage: str, task: str | None = None, metric: str | None = None,
               split: str | None = None, variant: str | None = None,
               **keys: Any) -> dict[str, Any] | None:
        """The summary's row (median, min, max, seeds) of `stage`, `task`, `metric`, `split`
        and `variant` (None: null) and of the `keys` given (train_size, layers, step); None where
        there is none."""
        given = {"stage": stage, "task": task, "metric": metric, "split": split,
                 "variant": variant, **keys}
        rows = self.summary
        for column, value in given.items():
            rows = rows.filter(pl.col(column).is_null() if value is None
                               else pl.col(column) == value)
        return rows.row(0, named=True) if rows.height else None

    def skipped(self, stage: str, task: str | None = None,
                variant: str | None = None) -> str | None:
        return why_skipped(self.results.skipped, stage, task, variant)

    def link(self, path: Any) -> str:
        """A path of the run, relative to the report (reports/ is one folder down)."""
        return f"../{path.as_posix() if hasattr(path, 'as_posix') else path}"
