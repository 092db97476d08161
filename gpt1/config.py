"""Typed view of `params.yaml`: loaded and validated once, with errors that name the key."""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    StrictInt,
    ValidationError,
    field_validator,
    model_validator,
)
from ruamel.yaml import YAML, YAMLError

from gpt1.errors import InputError
from gpt1.net import host_problem

DEFAULT_PARAMS = Path("params.yaml")
_SUBKEY = re.compile(r"^[\w.]+: ")
_PLAIN_KEY = re.compile(r"[\w-]+")  # a key the error messages write bare in a dotted path

# Numbers and switches are what YAML says they are: `true` is not 1, `1.0` not a whole number,
# `"5"` not a number (an integer is a fine real). Whole numbers are bounded where NumPy and torch
# take them: a count or size fits a 32-bit int, a seed is one NumPy accepts (0 <= seed < 2**32).
# Reals are finite: `Section` refuses .nan and .inf everywhere.
MOST = 2**31 - 1
Int = Annotated[int, Strict(), Field(le=MOST)]
Seed = Annotated[int, Strict(), Field(ge=0, lt=2**32)]
Real = Annotated[float, Strict()]
Bool = Annotated[bool, Strict()]

# A task's name names stages (`finetune@<name>`, which a user types in a shell) and a folder or
# file under data/, artifacts/, metrics/ and predictions/: letters, digits and _ alone, so no
# shell, path or DVC syntax gets in. `all` means every task.
TASK_NAME = re.compile(r"[A-Za-z0-9_]{1,64}")
TASK_NAME_RULE = ("a task name is 1 to 64 letters, digits and _ (not 'all'): it names stages "
                  "and folders")


def is_task_name(name: str) -> bool:
    """Whether `name` can name a registry task (`TASK_NAME`, and not `all`)."""
    return TASK_NAME.fullmatch(name) is not None and name != "all"


def _task_name(name: str) -> str:
    if not is_task_name(name):
        raise ValueError(f"{TASK_NAME_RULE}; got {name!r}")
    return name


TaskName = Annotated[str, AfterValidator(_task_name)]


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def _inside_root(path: str) -> str:
    """A path or glob under `ingest.root`: relative and never climbing out with `..`. A file
    outside the root is not a DVC dependency of ingest, so edits to it would go unseen."""
    if not path or Path(path).is_absolute() or ".." in PurePosixPath(path).parts:
        raise ValueError(f"{path!r} must be a relative path inside ingest.root (no '..', not "
                         "absolute): files outside the root are not tracked by DVC")
    return path


def _file_glob(pattern: str) -> str:
    """A glob that names files: `**` only as a whole path component (what pathlib's `glob`
    accepts) and not last, and a last component that is a name, not `.` (a folder)."""
    parts = PurePosixPath(pattern).parts
    if any("**" in part and part != "**" for part in parts):
        raise ValueError(f"{pattern!r}: '**' can only be a whole path component "
                         "(corpus/**/*.txt, not corpus/**.txt)")
    if not parts or parts[-1] in (".", "**") or pattern.endswith("/"):
        raise ValueError(f"{pattern!r} names a folder, not files: end it with a file name or "
                         "pattern (corpus/*.txt)")
    return pattern


UnderRoot = Annotated[str, AfterValidator(_inside_root)]
FilesUnderRoot = Annotated[str, AfterValidator(_inside_root), AfterValidator(_file_glob)]


class IngestParams(Section):
    root: str = Field(min_length=1)
    corpus: list[FilesUnderRoot] = Field(min_length=1)
    doc_chars: Int = Field(gt=0)
    max_train_examples: Int | None = Field(default=None, gt=0)
    max_dev_examples: Int | None = Field(default=None, gt=0)
    max_test_examples: Int | None = Field(default=None, gt=0)


class ExecutorParams(Section):
    """Who runs the batches of clean and tokenize: processes on this machine, or a Dask cluster.
    Their outputs are the same byte for byte whichever does, so no stage depends on this."""

    kind: Literal["local", "dask"] = "local"
    workers: Int = Field(default=0, ge=0)  # local processes or local Dask workers; 0: one a core
    address: str | None = None  # dask: a running cluster's scheduler; None starts a local one

    @model_validator(mode="after")
    def _address_is_for_dask(self) -> ExecutorParams:
        if self.address is not None and self.kind != "dask":
            raise ValueError(f"address {self.address!r} names a Dask scheduler: set kind: dask, "
                             "or address: null")
        return self


class CleanParams(Section):
    batch_docs: Int = Field(gt=0)
    min_chars: Int = Field(ge=0)
    dedupe: Bool


class BpeParams(Section):
    vocab_size: StrictInt = Field(ge=300, le=4_294_967_295)  # token ids are uint32
    min_frequency: Int = Field(ge=1)


class TokenizeParams(Section):
    val_every: Int = Field(ge=2)
    shard_tokens: Int = Field(gt=0)


class ModelParams(Section):
    n_ctx: Int = Field(gt=0)
    n_embd: Int = Field(gt=0)
    n_layer: Int = Field(gt=0)
    n_head: Int = Field(gt=0)
    dropout: Real = Field(ge=0.0, lt=1.0)

    @model_validator(mode="after")
    def _heads_divide_width(self) -> ModelParams:
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd ({self.n_embd}) must be divisible by n_head ({self.n_head})")
        return self


_DEVICE = re.compile(r"auto|cpu|cuda(:\d+)?")


def _device_name(name: str) -> str:
    """What `gpt1.training.device.resolve_device` accepts; whether CUDA is there is checked at
    start."""
    if not _DEVICE.fullmatch(name):
        raise ValueError(f"{name!r} is not a device: use auto, cpu, cuda or cuda:N")
    return name


Device = Annotated[str, AfterValidator(_device_name)]
Precision = Literal["auto", "fp32", "bf16"]
# torch.compile the training step: auto on CUDA for pretraining only
# (`gpt1.training.device.resolve_compile`)
Compile = Literal["auto"] | Bool
# a fine-tuning batch's width rounded up to a multiple of this (at most n_ctx): auto is 64 on CUDA,
# 1 (no rounding) on the CPU (`gpt1.training.finetune_loop.width_multiple`)
PadMultiple = Literal["auto"] | Annotated[Int, Field(gt=0)]


class TrainingParams(Section):
    """Knobs every training loop has."""

    device: Device
    precision: Precision
    compile: Compile = "auto"
    lr: Real = Field(gt=0)
    batch_size: Int = Field(gt=0)
    weight_decay: Real = Field(ge=0)
    grad_clip: Real = Field(gt=0)


# Where the token shards lie (tokenize's output; tasks/paths.py names it from here): the folder
# a model pretrained here is made from, and so `pretrain.source_dir` for `pretrain.source: train`.
SHARDS_FOLDER = "data/shards"
# Where a pretrained model can come from: pretrained here, OpenAI's release, a HuggingFace folder.
Source = Literal["train", "openai", "hf"]
# the released sources, as the logs and the report name them
SOURCE_TITLES = {"openai": "OpenAI's released GPT-1", "hf": "a HuggingFace openai-gpt model"}


class PretrainParams(TrainingParams):
    seed: Seed
    source: Source = "train"
    # the folder the pretrained model is made from, a dependency of stage pretrain: the shards
    # for train, the release folder for openai and hf
    source_dir: str = SHARDS_FOLDER
    max_steps: Int = Field(gt=0)
    warmup_steps: Int = Field(ge=0)
    schedule: Literal["cosine", "linear"]
    eval_every: Int = Field(gt=0)
    eval_batches: Int = Field(gt=0)
    log_every: Int = Field(gt=0)
    checkpoint_every: Int = Field(gt=0)
    keep_checkpoints: Int = Field(ge=1)
    keep_other_runs: Int | None = Field(default=None, ge=0)  # None: keep every other run's
    extend: Bool = False  # continue a run of the same settings but a smaller max_steps
    peak_tflops: Real | None = Field(gt=0)
    # steps whose model is kept; those after max_steps are never reached (the stage says so)
    snapshots: list[Annotated[Int, Field(ge=0)]] = Field(default_factory=list)

    @model_validator(mode="after")
    def _warmup_within_run(self) -> PretrainParams:
        if self.warmup_steps > self.max_steps:
            raise ValueError(f"warmup_steps: {self.warmup_steps} is more than max_steps "
                             f"({self.max_steps}): the learning rate would never reach its peak")
        return self

    @property
    def released(self) -> bool:
        """The model comes from a release (source openai or hf), not from pretraining here."""
        return self.source != "train"

    @model_validator(mode="after")
    def _source_folder_named(self) -> PretrainParams:
        if not self.released and self.source_dir != SHARDS_FOLDER:
            raise ValueError(f"source_dir: source train pretrains on the token shards, so it "
                             f"must be {SHARDS_FOLDER}, got {self.source_dir!r} (a release "
                             "folder needs source openai or hf)")
        if self.released and (not self.source_dir
                                       or Path(self.source_dir) == Path(SHARDS_FOLDER)):
            raise ValueError(f"source_dir: source {self.source} imports a released model: name "
                             f"its folder, got {self.source_dir!r}")
        return self

    @model_validator(mode="after")
    def _snapshots_within_run(self) -> PretrainParams:
        if sorted(set(self.snapshots)) != self.snapshots:
            raise ValueError(f"snapshots: list each step once, in increasing order, got "
                             f"{self.snapshots}")
        return self


class FinetuneKnobs(TrainingParams):
    """`finetune.train`: shared by every task and seed."""

    epochs: Int = Field(gt=0)
    warmup_fraction: Real = Field(ge=0, lt=1)
    lm_coef: Real = Field(ge=0)
    clf_dropout: Real = Field(ge=0, lt=1)
    pad_to_multiple: PadMultiple = "auto"


class FinetuneTrainParams(FinetuneKnobs):
    """The knobs of one fine-tuning run: one task's, with one of `finetune.seeds`."""

    seed: Seed


# The names of the task families, each an object in `gpt1.downstream.families.FAMILIES` (a test
# checks they agree): a new family is its object there and its name here. Config cannot import
# that module: every stage imports config, so each would depend on it.
Family = Literal["classification", "entailment", "similarity", "multiple_choice"]
# Each family's text fields, the columns of its table between `idx` and `label` (those of
# `FAMILIES`, which a test checks): what a `reader: table` task's `table.columns` maps.
FAMILY_FIELDS: dict[Family, tuple[str, ...]] = {
    "classification": ("text",),
    "entailment": ("premise", "hypothesis"),
    "similarity": ("text_a", "text_b"),
    "multiple_choice": ("context", "question", "choices"),
}
# Each family's shortest sequence in tokens: its special tokens and one token of each field (of
# `FAMILIES`' layouts, which a test checks); a context shorter leaves an example nothing to read.
FAMILY_MIN_CTX: dict[Family, int] = {
    "classification": 3,  # <start> text <classify>
    "entailment": 5,  # <start> premise <delim> hypothesis <classify>
    "similarity": 5,  # <start> text_a <delim> text_b <classify>
    "multiple_choice": 6,  # <start> context question <delim> choice <classify>
}
Metric = Literal["accuracy", "mcc", "f1", "pearson", "spearman"]
CLASS_METRICS = frozenset({"accuracy", "mcc", "f1"})
REGRESSION_METRICS = frozenset({"pearson", "spearman"})
# train; dev and test, optionally with a suffix naming a variant (dev_mismatched, test_high);
# predict, a file only a fine-tuned model scores (ingest does not read it)
_SPLIT_NAME = re.compile(r"train|predict|(dev|test)(_[a-z0-9]+)?")
PREDICT_SPLIT = "predict"


def is_split_name(name: str) -> bool:
    """Whether `name` can name a split of a task's `files`."""
    return _SPLIT_NAME.fullmatch(name) is not None


class HoldoutParams(Section):
    """Dev examples drawn out of the train file (a task released without a labelled dev set)."""

    size: Int = Field(gt=0)
    seed: Seed


# The reader of ordinary tables (`gpt1.downstream.tables`), which a task's `table` section sets up
TABLE_READER = "table"
TableFormat = Literal["csv", "tsv", "jsonl", "parquet"]
# a table's format by its file's extension, where `table.format` does not name it
TABLE_EXTENSIONS: dict[str, TableFormat] = {
    ".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".jsonl": "jsonl", ".ndjson": "jsonl",
    ".parquet": "parquet", ".pq": "parquet",
}


def _as_text(value: object) -> object:
    """A YAML whole number where a table's value is meant (`1: negative`): its text, as the
    file holds it."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


CellText = Annotated[str, BeforeValidator(_as_text)]


class TableParams(Section):
    """How `reader: table` reads a task's files, ordinary tables: which column holds each of the
    family's fields, what the label values mean, which rows belong to which split."""

    format: TableFormat | None = None  # None: each file's extension says (TABLE_EXTENSIONS)
    # family field (or label) -> the file's column; choices: one list column or several columns.
    # A field not named is read from the column of its own name.
    columns: dict[str, str | list[str]] = Field(default_factory=dict)
    label_values: dict[CellText, CellText] | None = None  # the file's values -> labels
    scores: list[Real] | None = None  # [low, high]: a regression's score range
    split_column: str | None = None  # one file holding several splits: the column naming each
    split_values: dict[str, CellText] = Field(default_factory=dict)  # split -> its value there

    @model_validator(mode="after")
    def _consistent(self) -> TableParams:
        if self.scores is not None and (len(self.scores) != 2
                                        or not self.scores[0] < self.scores[1]):
            raise ValueError(f"scores: give [low, high] with low < high, got {self.scores}")
        if self.split_values and self.split_column is None:
            raise ValueError("split_values: name the column that holds them (split_column)")
        return self

    def column(self, field: str) -> str | list[str]:
        """The file's column(s) of family field (or `label`) `field`."""
        return self.columns.get(field, field)

    def split_value(self, split: str) -> str:
        """The value of `split_column` that marks the rows of `split`."""
        return self.split_values.get(split, split)


class TaskParams(Section):
    """One entry of the task registry: where its data is and how it is read, fed and scored."""

    title: str
    family: Family
    reader: str
    files: dict[str, str | list[str]]  # split -> path(s) under ingest.root
    holdout: HoldoutParams | None = None
    labels: list[str] | None = None  # None: a regression (similarity) or a choice index
    metrics: list[Metric] = Field(min_length=1)
    paper: dict[str, Real] = Field(default_factory=dict)  # eval split -> the paper's metrics[0]
    glue: Bool = False  # a GLUE task: averaged beside the paper's average in the report
    overrides: dict[str, object] = Field(default_factory=dict)  # finetune.train keys
    table: TableParams | None = None  # reader: table only

    @field_validator("files")
    @classmethod
    def _files_under_root(cls, files: dict[str, str | list[str]]) -> dict[str, str | list[str]]:
        for split, paths in files.items():
            for path in [paths] if isinstance(paths, str) else paths:
                try:
                    _inside_root(path)
                except ValueError as err:
                    raise ValueError(f"{split}: {err}") from None
        return files

    @model_validator(mode="after")
    def _consistent(self) -> TaskParams:
        bad = [name for name in self.files if not is_split_name(name)]
        if bad:
            raise ValueError(f"files: split names must be train, dev[_x] or test[_x] (and "
                             f"{PREDICT_SPLIT}: a file to score with the fine-tuned model), got "
                             f"{bad}")
        if "train" not in self.files:
            raise ValueError("files.train is missing")
        self._no_file_in_two_splits()
        if self.holdout is not None and "dev" in self.files:
            raise ValueError("files.dev and holdout both give a dev split: keep one")
        if not self.eval_splits:
            raise ValueError("no dev split: give files.dev (or holdout)")
        unknown = sorted(set(self.paper) - set(self.eval_splits))
        if unknown:
            raise ValueError(f"paper: {unknown} are not dev splits {self.eval_splits}")
        if self.family == "multiple_choice":
            if self.labels is not None:
                raise ValueError("labels: a multiple-choice label is the index of the answer")
        elif self.labels is not None and (len(self.labels) < 2
                                          or len(set(self.labels)) != len(self.labels)):
            raise ValueError(f"labels: need at least 2 distinct labels, got {self.labels} (or "
                             "none, for a similarity score): a classifier of one class says it "
                             "always")
        elif self.labels is None and self.family != "similarity":
            raise ValueError(f"labels: a {self.family} task needs its labels")
        allowed = REGRESSION_METRICS if self.regression else CLASS_METRICS
        if not set(self.metrics) <= allowed:
            raise ValueError(f"metrics: {self.metrics} do not apply to this task "
                             f"(use {sorted(allowed)})")
        return self

    def _no_file_in_two_splits(self) -> None:
        """A train file read as a dev or test split too would score a model on rows it trained
        on, unless a table's split column splits its rows between them; a file to score
        (`predict`) may be any."""
        if self.table is not None and self.table.split_column is not None:
            return

        def named(paths: str | list[str]) -> set[str]:
            return {PurePosixPath(p).as_posix() for p in ([paths] if isinstance(paths, str)
                                                          else paths)}

        train = named(self.files["train"])
        for split, paths in self.files.items():
            again = sorted(named(paths) & train) if split not in ("train", PREDICT_SPLIT) else []
            if again:
                raise ValueError(f"files.{split}: {again[0]!r} is files.train too: its {split} "
                                 "figures would be measured on the rows it trained on; give it "
                                 "a file of its own")

    @model_validator(mode="after")
    def _table_fits(self) -> TaskParams:
        """`table` is there exactly for `reader: table`, and fits the family, labels and files."""
        if self.reader != TABLE_READER:
            if self.table is not None:
                raise ValueError(f"table: only for reader: {TABLE_READER} (this task's reader is "
                                 f"{self.reader!r})")
            return self
        if self.table is None:
            raise ValueError(f"table: reader: {TABLE_READER} needs a table section (its columns, "
                             "and format, label_values, scores, split_column where they apply)")
        self._table_columns_fit(self.table)
        self._table_labels_fit(self.table)
        self._table_files_fit(self.table)
        return self

    def _table_columns_fit(self, table: TableParams) -> None:
        fields = FAMILY_FIELDS[self.family]
        unknown = [key for key in table.columns if key not in (*fields, "label")]
        if unknown:
            raise ValueError(f"table.columns: {unknown} are not fields of a {self.family} task "
                             f"(its fields: {', '.join(fields)}, label)")
        for field, column in table.columns.items():
            if isinstance(column, str):
                continue
            if field != "choices":
                raise ValueError(f"table.columns.{field}: one column's name, got {column}")
            if len(column) < 2 or len(set(column)) != len(column):
                raise ValueError(f"table.columns.choices: one list column, or at least 2 "
                                 f"distinct columns (one per choice), got {column}")

    def _table_labels_fit(self, table: TableParams) -> None:
        if self.regression and table.scores is None:
            raise ValueError("table.scores: a similarity task without labels is a regression: "
                             "give the scores' range [low, high]")
        if not self.regression and table.scores is not None:
            raise ValueError("table.scores: only for a regression (a similarity task with "
                             "labels: null)")
        if table.label_values is None:
            return
        if self.regression:
            raise ValueError("table.label_values: a regression's label is a score, read as it is")
        targets = list(dict.fromkeys(table.label_values.values()))
        if self.family != "multiple_choice" and len(targets) < 2:
            raise ValueError(f"table.label_values: every value maps to {targets}: a classifier "
                             "needs at least 2 labels")
        if self.family == "multiple_choice":
            choices = table.column("choices")
            names = choices if isinstance(choices, list) else []
            bad = [t for t in targets if not t.isdigit() and t not in names]
            what = "choice indices from 0" + (f" or the choice columns {names}" if names else "")
        else:
            bad = [t for t in targets if t not in (self.labels or [])]
            what = f"labels {self.labels}"
        if bad:
            raise ValueError(f"table.label_values: {bad} are not {what}")

    def _table_files_fit(self, table: TableParams) -> None:
        unknown_format = [] if table.format is not None else [
            (split, path) for split, paths in self.files.items()
            for path in ([paths] if isinstance(paths, str) else paths)
            if PurePosixPath(path).suffix.lower() not in TABLE_EXTENSIONS]
        if unknown_format:
            split, path = unknown_format[0]
            raise ValueError(f"table.format: cannot tell the format of files.{split} {path!r} "
                             "from its extension: set format (csv, tsv, jsonl or parquet) or "
                             f"name the file {', '.join(TABLE_EXTENSIONS)}")
        if table.split_column is None:
            return
        unknown = sorted(set(table.split_values) - set(self.files))
        if unknown:
            raise ValueError(f"table.split_values: {unknown} are not splits of files "
                             f"{sorted(self.files)}")
        values = {split: table.split_value(split) for split in self.files}
        if len(set(values.values())) != len(values):
            raise ValueError(f"table.split_values: each split needs its own value of "
                             f"{table.split_column!r}, got {values}")

    @property
    def data_splits(self) -> list[str]:
        """The splits ingest reads: every split of `files` but `predict`."""
        return [split for split in self.files if split != PREDICT_SPLIT]

    @property
    def regression(self) -> bool:
        """A similarity task without labels predicts a score (STS-B)."""
        return self.family == "similarity" and self.labels is None

    @property
    def eval_splits(self) -> list[str]:
        """The labelled splits scored after fine-tuning: `dev` first, then its variants."""
        names = [n for n in self.files if n.startswith("dev")]
        if self.holdout is not None:
            names.append("dev")
        return sorted(names, key=lambda n: (n != "dev", n))


class FinetuneParams(Section):
    tasks: Literal["all"] | list[str]
    seeds: list[Seed] = Field(min_length=1)
    train: FinetuneKnobs

    @field_validator("tasks")
    @classmethod
    def _task_names(cls, tasks: Literal["all"] | list[str]) -> Literal["all"] | list[str]:
        for index, name in enumerate([] if tasks == "all" else tasks):
            if not is_task_name(name):
                raise ValueError(f"{index}: {TASK_NAME_RULE}; got {name!r}")
        return tasks

    @model_validator(mode="after")
    def _distinct_seeds(self) -> FinetuneParams:
        if len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds: list each seed once, got {self.seeds}")
        return self

    def for_task(self, task: TaskParams, seed: int) -> FinetuneTrainParams:
        """The shared training knobs with the task's overrides applied (and validated)."""
        return FinetuneTrainParams(**{**self.train.model_dump(), **task.overrides, "seed": seed})


class ServerParams(Section):
    """Where `python -m flows.serve` starts a Prefect server when PREFECT_API_URL is not set."""

    host: str
    port: Int = Field(ge=1, le=65_535)

    @field_validator("host")
    @classmethod
    def _a_host(cls, host: str) -> str:
        if (problem := host_problem(host)) is not None:
            raise ValueError(problem)
        return host


DAYS_30 = 30 * 24 * 3600  # the longest wait the flows take, in seconds


class FlowsParams(Section):
    """The Prefect flows: how stages are retried, how runs on one checkout queue, where they
    are served. No stage reads these, so changing them re-runs nothing."""

    retries: Int = Field(ge=0)
    retry_delay_seconds: Real = Field(ge=0, le=DAYS_30)
    lock_timeout_seconds: Real = Field(ge=0, le=DAYS_30)
    server: ServerParams


class SampleParams(Section):
    """A short text the pretrained model writes for the report (`gpt1.model.generate.sample`):
    seeded, so the same model writes the same text."""

    prompt: str = Field(min_length=1)
    tokens: Int = Field(gt=0)
    temperature: Real = Field(ge=0)
    top_k: Int | None = Field(gt=0)
    seed: Seed


class LMEvalParams(Section):
    files: list[FilesUnderRoot] = Field(default_factory=list)  # held-out text: globs under the root
    batch_size: Int = Field(gt=0)
    sample: SampleParams


Variant = Literal["full", "no_pretrain", "no_aux", "lstm"]
# The zero-shot heuristics (paper §5, `gpt1.downstream.zero_shot_heuristics`), by what they answer
Heuristic = Literal["sentiment", "acceptability", "choice"]
# the family whose tables each heuristic reads: a sentence (`text`), or context, question, choices
HEURISTIC_FAMILY: dict[Heuristic, Family] = {"sentiment": "classification",
                                       "acceptability": "classification",
                                       "choice": "multiple_choice"}


TrainSize = Annotated[Int, Field(gt=0)] | None  # the first N train rows; None: all of them


class AblationParams(Section):
    """Table 5: each variant fine-tuned on each task at each train size, with every seed."""

    variants: list[Variant] = Field(min_length=1)
    tasks: dict[TaskName, list[TrainSize]]  # registry task -> train sizes

    @field_validator("tasks")
    @classmethod
    def _sizes_listed_once(cls, tasks: dict[str, list[int | None]]) -> dict[str, list[int | None]]:
        for name, sizes in tasks.items():
            if not sizes or len(set(sizes)) != len(sizes):
                raise ValueError(f"{name}: list each train size once (null: all rows), got "
                                 f"{sizes}")
        return tasks


class TransferParams(Section):
    """Figure 2 (left): each task fine-tuned from the first k pretrained blocks, k = 0..n_layer."""

    tasks: dict[TaskName, TrainSize]  # registry task -> train size


class ZeroShotParams(Section):
    """Figure 2 (right): each pretraining snapshot scored by the heuristics, no fine-tuning."""

    tasks: dict[TaskName, Heuristic]  # registry task -> the heuristic that answers it
    max_examples: Int | None = Field(gt=0)  # per split scored (CoLA's train split too)
    batch_size: Int = Field(gt=0)


class LSTMParams(Section):
    """The recurrent control of Table 5, pretrained by stage `pretrain_control@lstm` with the
    pretrain knobs, on the same shards for the same number of tokens."""

    n_embd: Int | None = Field(gt=0)  # units; None: the most within the Transformer's parameters
    lr: Real | None = Field(gt=0)  # None: pretrain.lr


class AnalysisParams(Section):
    """The paper's evidence (§5): ablations, layers transferred, zero-shot behaviour."""

    seeds: list[Seed] = Field(min_length=1)
    max_dev_examples: Int | None = Field(gt=0)  # dev rows scored (None: all)
    ablation: AblationParams
    transfer: TransferParams
    zero_shot: ZeroShotParams
    lstm: LSTMParams

    @model_validator(mode="after")
    def _names_known(self) -> AnalysisParams:
        if len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds: list each seed once, got {self.seeds}")
        variants = self.ablation.variants
        if len(set(variants)) != len(variants):
            raise ValueError(f"ablation.variants: list each once, got {variants}")
        return self


class Params(Section):
    ingest: IngestParams
    executor: ExecutorParams
    clean: CleanParams
    bpe: BpeParams
    tokenize: TokenizeParams
    model: ModelParams
    pretrain: PretrainParams
    finetune: FinetuneParams
    tasks: dict[TaskName, TaskParams] = Field(min_length=1)
    lm_eval: LMEvalParams
    analysis: AnalysisParams
    flows: FlowsParams

    @model_validator(mode="after")
    def _tasks_known_and_overrides_valid(self) -> Params:
        requested = self.finetune.tasks
        if requested != "all":
            if not requested or len(set(requested)) != len(requested):
                raise ValueError(f"finetune.tasks: list each task once (or `all`): {requested}")
            unknown = [t for t in requested if t not in self.tasks]
            if unknown:
                raise ValueError(f"finetune.tasks: {unknown} are not in the task registry "
                                 f"(tasks: {sorted(self.tasks)})")
        for name, task in self.tasks.items():
            unknown_keys = set(task.overrides) - set(FinetuneKnobs.model_fields)
            if unknown_keys:
                raise ValueError(f"tasks.{name}.overrides: unknown keys {sorted(unknown_keys)}")
            try:
                self.finetune.for_task(task, self.finetune.seeds[0])
            except ValidationError as err:
                bad = "; ".join(f"tasks.{name}.overrides.{'.'.join(map(str, e['loc']))}: "
                                f"{e['msg']} (got {e['input']!r})" for e in err.errors())
                raise ValueError(bad) from None
        for key in ("ablation", "transfer", "zero_shot"):
            unknown = sorted(set(getattr(self.analysis, key).tasks) - set(self.tasks))
            if unknown:
                raise ValueError(f"analysis.{key}.tasks: {unknown} are not in the task registry "
                                 f"(tasks: {sorted(self.tasks)})")
        return self

    @model_validator(mode="after")
    def _context_holds_every_family(self) -> Params:
        """model.n_ctx leaves every task fine-tuned (here or in an analysis) room for its
        family's special tokens and a token of each of its texts."""
        tuned = {*self.requested_tasks(), *self.analysis.ablation.tasks,
                 *self.analysis.transfer.tasks}
        short = sorted((FAMILY_MIN_CTX[self.tasks[name].family], name) for name in tuned
                       if FAMILY_MIN_CTX[self.tasks[name].family] > self.model.n_ctx)
        if short:
            least, name = short[-1]
            raise ValueError(f"model.n_ctx: {self.model.n_ctx} tokens leave task {name} "
                             f"({self.tasks[name].family}) no room for its special tokens and "
                             f"a token of each text; set it to at least {least}")
        return self

    @model_validator(mode="after")
    def _zero_shot_heuristics_answer_their_tasks(self) -> Params:
        """Each heuristic of `analysis.zero_shot.tasks` reads its task's family (two labels but
        for choice), and the task's first metric has a chance level (accuracy or mcc)."""
        for name, heuristic in self.analysis.zero_shot.tasks.items():
            task, family = self.tasks[name], HEURISTIC_FAMILY[heuristic]
            key = f"analysis.zero_shot.tasks.{name}"
            if task.family != family:
                raise ValueError(f"{key}: the {heuristic} heuristic answers {family} tasks; "
                                 f"{name} is {task.family}")
            if heuristic != "choice" and len(task.labels or []) != 2:
                raise ValueError(f"{key}: the {heuristic} heuristic answers two-label tasks; "
                                 f"{name} has labels {task.labels}")
            if task.metrics[0] not in ("accuracy", "mcc"):
                raise ValueError(f"{key}: {name} is scored by {task.metrics[0]}; the zero-shot "
                                 "stage reports accuracy or mcc")
        return self

    def task(self, name: str) -> TaskParams:
        """Registry task `name`; bad input, naming the registry's tasks, where there is none."""
        if name not in self.tasks:
            raise ParamsError(f"task {name!r} is not in the task registry (tasks: "
                              f"{sorted(self.tasks)})")
        return self.tasks[name]

    def requested_tasks(self) -> list[str]:
        """The tasks to fine-tune: `finetune.tasks`, or every registry task for `all`."""
        return list(self.tasks) if self.finetune.tasks == "all" else list(self.finetune.tasks)


class ParamsError(InputError):
    """`params.yaml` is missing, unparsable or invalid; the message names the file and key."""


def _dotted(loc: tuple[int | str, ...]) -> str:
    """An error's place as a dotted key. Where the fault is a mapping's key itself (pydantic
    follows it with `[key]`), that key is quoted, unless a plain word: `tasks.'my task'`."""
    faulty = {i - 1 for i, part in enumerate(loc) if part == "[key]"}
    return ".".join(repr(part) if i in faulty and not _PLAIN_KEY.fullmatch(str(part))
                    else str(part) for i, part in enumerate(loc) if part != "[key]")


def _format_errors(path: Path, err: ValidationError) -> str:
    """One line for one error (`params.yaml: model.n_embd: ...`), else a line per error."""
    lines = [f"{path}: {err.error_count()} invalid value(s)"]
    for e in err.errors():
        key = _dotted(e["loc"])
        if e["type"] == "value_error":  # our validators: the message may start with a sub-key
            msg = e["msg"].removeprefix("Value error, ")
            if _SUBKEY.match(msg):
                lines.append(f"  {key}.{msg}" if key else f"  {msg}")
            else:
                lines.append(f"  {key or '<root>'}: {msg}")
        else:
            got = "" if e["type"] == "missing" else f" (got {e['input']!r})"
            lines.append(f"  {key or '<root>'}: {e['msg']}{got}")
    if len(lines) == 2:
        return f"{path}: {lines[1].strip()}"
    return "\n".join(lines)


def parse_params(raw: object, path: Path = DEFAULT_PARAMS) -> Params:
    """Validate an already-parsed params mapping; `path` only labels the errors."""
    try:
        return Params.model_validate(raw)
    except ValidationError as err:
        raise ParamsError(_format_errors(path, err)) from None


def read_yaml(text: str) -> Any:
    """Parse YAML as DVC parses params.yaml and dvc.yaml: YAML 1.2 (`yes`, `off` are strings,
    `1e-3` a float) by ruamel.yaml's safe loader, into plain dicts, lists and scalars. A key
    given twice in a mapping is an error (a `YAMLError`), as it is to DVC. Parsed by the C
    parser where ruamel.yaml.clib is there (as DVC parses; five times as fast); text it refuses
    is parsed again by the pure-Python one, whose errors name what was expected and found."""
    try:
        return YAML(typ="safe").load(text)
    except YAMLError:
        return YAML(typ="safe", pure=True).load(text)


def yaml_problem(err: YAMLError) -> str:
    """What a ruamel.yaml error says, on one line and without its position."""
    # the duplicate-key problem quotes both values in full: a whole section, perhaps
    problem = re.sub(r' with value ".*', "", getattr(err, "problem", None) or "")
    what = ": ".join(filter(None, [getattr(err, "context", None), problem]))
    return what or " ".join(str(err).split())


def yaml_error(path: Path, err: YAMLError) -> ParamsError:
    """One line for a YAML error in file `path`: `file:line:column: not valid YAML: what`."""
    mark = getattr(err, "problem_mark", None)
    where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
    return ParamsError(f"{where}: not valid YAML: {yaml_problem(err)}")


def load_params(path: Path | str = DEFAULT_PARAMS) -> Params:
    """Read and validate `params.yaml`."""
    path = Path(path)
    if not path.is_file():
        raise ParamsError(f"{path}: not found (run from the repository root or pass --params)")
    try:
        raw = read_yaml(path.read_text(encoding="utf-8"))
    except YAMLError as err:
        raise yaml_error(path, err) from None
    except UnicodeDecodeError as err:
        raise ParamsError(f"{path}: not UTF-8 text (byte {err.start})") from None
    return parse_params(raw, path)
