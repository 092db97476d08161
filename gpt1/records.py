"""The small JSON files the pipeline writes for itself: manifests, a task's `status.json`, the
metrics files, the stage records, and the record of an output a stage had nothing to write
into. Each kind has a schema here (a `Record`: the keys its readers use, of the types they use
them as; other keys allowed), and every reader goes through `read_record`, which names the file
and the stage that writes it when one is damaged: cut short, emptied, or valid JSON of another
shape (`{}`, `[]`, `null`, a key missing or of the wrong type)."""

from __future__ import annotations

import json
import reprlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from gpt1.atomic import atomic_dir, atomic_file, write_text
from gpt1.config import SOURCE_TITLES
from gpt1.errors import InputError, MissingInputError

STATUS_FILE = "status.json"  # in an output folder of a stage that had nothing to do: why
MAX_LAYERS = 1024  # more blocks than any model here has: a transfer file's n_layer is bounded


class RecordError(InputError):
    """A file a stage wrote is damaged: `path`, what is wrong (`detail`) and the `stage` to
    run again."""

    def __init__(self, path: Path, stage: str, detail: str) -> None:
        super().__init__(f"{path}: damaged, not the JSON stage {stage} writes ({detail}); run "
                         f"`dvc repro --force {stage}` to write it again")
        self.path, self.stage, self.detail = path, stage, detail


# -- the schemas ------------------------------------------------------------------------------


class Record(BaseModel):
    """A JSON object one stage writes and another reads: the keys the readers use, of the types
    they use them as (strictly: no `"3"` for 3, no `true` for 1); other keys are allowed. A
    field declared `X = None` (not `X | None`) may be absent, but not null."""

    model_config = ConfigDict(extra="allow", strict=True)


class Ran(Record):
    """A file that says whether its stage ran: `run: false` with the `reason` (`NotRun`), or
    `run: true` with what the subclass requires. `read_record` checks `run`, then the schema
    that applies."""

    run: Literal[True]


class NotRun(Record):
    """A stage that had nothing to do, and why (`record_not_run`, `write_not_run`)."""

    run: Literal[False]
    reason: str


class _Outcome(Record):
    run: bool


def _keyed(record: Record, keys: Iterable[str], schema: type[Record], listed: str) -> None:
    """Each of `keys` (which the record's `listed` names) is a key of `record` holding a
    `schema` object."""
    extra = record.model_extra or {}
    for key in keys:
        if key not in extra:
            raise ValueError(f"{key}: missing, though {listed} names it")
        try:
            schema.model_validate(extra[key])
        except ValidationError as err:
            raise ValueError(f"{key}{_problem(err, sub=True)}") from None


class TaskStatus(Ran):
    """`data/raw/tasks/<task>/status.json` (stage ingest): the rows of each split ingested."""

    rows: dict[str, int]


class ShardEntry(Record):
    file: str
    tokens: int
    sha256: str


class SplitManifest(Record):
    shards: list[ShardEntry]


class Manifest(Record):
    """`data/shards/manifest.json` (stage tokenize): the vocabulary's size (which pretraining
    checks against the tokenizer's) and each split's shards."""

    vocab_size: int
    splits: dict[str, SplitManifest]


class TrainShards(Record):
    train: SplitManifest


class TrainValShards(TrainShards):
    val: SplitManifest


class TrainManifest(Record):
    """What lm_eval reads of the manifest: the train split's shards (its unigram baseline)."""

    splits: TrainShards


class PretrainManifest(Manifest):
    """What pretraining reads of the manifest: the vocabulary's size, both splits' shards."""

    splits: TrainValShards


class Machine(Record):
    cpu: str
    cpu_capability: str
    threads: int
    torch: str
    python: str
    gpu: str = None  # only with a GPU
    native_bf16: bool | None = None  # older files lack it
    amx: bool | None = None  # older files lack it


class Compute(Record):
    """Where a training run computed (`gpt1.training.device.Placement.record`)."""

    device: str
    dtype: str
    compiled: bool
    processes: int
    machine: Machine


IMPORTED_FACTS = ("source_dir", "parameters", "vocab_size", "n_ctx", "n_embd", "n_layer",
                  "n_head")


class PretrainLosses(Record):
    """What lm_eval reads of pretraining's metrics file: the losses it puts beside its own (none
    for an imported model)."""

    val_loss: float | None = None
    unigram_val_loss: float | None = None

    @model_validator(mode="after")
    def _baseline(self) -> PretrainLosses:
        if self.val_loss is not None and self.unigram_val_loss is None:
            raise ValueError("unigram_val_loss: missing beside a val_loss")
        return self


class PretrainMetrics(Ran):
    """`metrics/pretrain.json`, `metrics/pretrain_lstm.json`: a run's figures, or (`source`
    openai or hf) the released model imported."""

    source: str = "train"
    train_loss: float | None = None
    val_loss: float | None = None
    val_perplexity: float | None = None
    unigram_val_loss: float | None = None
    steps: float | None = None
    tokens: float | None = None
    seconds: float | None = None
    startup_seconds: float | None = None
    tokens_per_second: float | None = None
    mfu: float | None = None
    parameters: int | None = None
    compute: Compute = None  # older files lack it
    source_dir: str | None = None
    vocab_size: int | None = None
    n_ctx: int | None = None
    n_embd: int | None = None
    n_layer: int | None = None
    n_head: int | None = None

    @model_validator(mode="after")
    def _imported(self) -> PretrainMetrics:
        if self.source == "train":
            return self
        if self.source not in SOURCE_TITLES:
            raise ValueError(f"source: {reprlib.repr(self.source)} is none of "
                             f"{['train', *SOURCE_TITLES]}")
        if missing := [key for key in IMPORTED_FACTS if getattr(self, key) is None]:
            raise ValueError(f"{', '.join(missing)}: missing for a model imported from "
                             f"{self.source}")
        return self


class HeldoutFigures(Record):
    tokens: float
    words: float
    loss: float
    perplexity: float
    word_loss: float
    word_perplexity: float
    unigram_loss: float | None = None


class LmEvalMetrics(Ran):
    """`metrics/lm_eval.json`: the held-out text's figures per file and over all of them."""

    files: dict[str, HeldoutFigures]
    all: HeldoutFigures
    val_loss: float | None
    unigram_val_loss: float | None

    @model_validator(mode="after")
    def _baseline(self) -> LmEvalMetrics:
        if self.val_loss is not None and self.unigram_val_loss is None:
            raise ValueError("unigram_val_loss: null beside a val_loss")
        return self


class Generated(Record):
    """`artifacts/lm_eval/generated.json`: the text the pretrained model wrote."""

    model: str
    prompt_as_read: str
    continuation: str
    tokens: int
    temperature: float
    top_k: int | None
    seed: int


class Epoch(Record):
    epoch: int
    train_loss: float
    dev: dict[str, dict[str, float | None]]


class SeedRun(Record):
    """One fine-tuning run (a metrics file's `runs`)."""

    seed: int
    epochs: list[Epoch]


class SplitFigures(Record):
    """An eval split's figures in a finetune metrics file, under the split's name (all but the
    first split, whose figures lie at the top)."""


class SplitTruncation(Record):
    examples: int
    cut: int  # examples longer than the context, cut to fit it
    median_tokens: float | None  # their median length uncut; None where none was cut


class Truncation(Record):
    """What fine-tuning cut to fit the context: per split, how many examples and how long."""

    n_ctx: int
    splits: dict[str, SplitTruncation]


class FinetuneMetrics(Ran):
    """`metrics/finetune/<task>.json`: each seed's run, the sizes and the eval splits, and the
    examples cut to fit the context."""

    split: str
    metrics: list[str]
    train_examples: int
    eval_examples: dict[str, int]
    truncated: Truncation
    runs: list[SeedRun]
    compute: Compute | None = None

    @model_validator(mode="after")
    def _splits(self) -> FinetuneMetrics:
        others = [split for split in self.eval_examples if split != self.split]
        _keyed(self, others, SplitFigures, "eval_examples")
        extra = self.model_extra or {}
        for where, figures in [("", extra), *((f"{s}.", extra[s]) for s in others)]:
            for metric in self.metrics:
                value = figures.get(f"majority_{metric}", 0.0)
                if isinstance(value, bool) or not isinstance(value, int | float):
                    raise ValueError(f"{where}majority_{metric}: {reprlib.repr(value)} is not "
                                     "a number")
        return self


class AblationSize(Record):
    max_train_examples: int | None
    train_examples: int
    runs: list[SeedRun]


class AblationMetrics(Ran):
    """`metrics/ablation/<variant>/<task>.json`: each train size's runs, under the key `sizes`
    lists."""

    sizes: list[str]

    @model_validator(mode="after")
    def _sizes(self) -> AblationMetrics:
        _keyed(self, self.sizes, AblationSize, "sizes")
        return self


class TransferLayer(Record):
    """One k of a transfer file: its runs, or the ablation variant whose file holds them."""

    from_ablation: str = None
    runs: list[SeedRun] = None

    @model_validator(mode="after")
    def _runs(self) -> TransferLayer:
        if self.from_ablation is None and self.runs is None:
            raise ValueError("runs: missing (or from_ablation)")
        return self


class TransferMetrics(Ran):
    """`metrics/transfer/<task>.json`: the runs with k = 0 .. n_layer blocks transferred, under
    `layers_<k>`."""

    n_layer: int = Field(ge=0, le=MAX_LAYERS)
    max_train_examples: int | None
    train_examples: int

    @model_validator(mode="after")
    def _layers(self) -> TransferMetrics:
        present = [f"layers_{k}" for k in range(self.n_layer + 1)
                   if f"layers_{k}" in (self.model_extra or {})]
        _keyed(self, present, TransferLayer, "n_layer")
        return self


class ZeroShotCurve(Record):
    steps: list[int]
    scores: list[float]

    @model_validator(mode="after")
    def _paired(self) -> ZeroShotCurve:
        if len(self.steps) != len(self.scores):
            raise ValueError(f"{len(self.steps)} steps but {len(self.scores)} scores")
        return self


class ZeroShotMetrics(Ran):
    """`metrics/zero_shot/<task>.json`: each trunk's score at each snapshot, and chance."""

    split: str
    metric: str
    heuristic: str
    chance: float
    examples: int
    train_examples: int = None  # where the heuristic learns from train examples
    trunks: dict[str, ZeroShotCurve]


class StageRecord(Record):
    """`metrics/stages/<stage>.json` (`tasks.stage.write_stage_record`)."""

    stage: str
    seconds: float
    finished: str | None = None
    commit: str | None = None
    uncommitted_changes: bool | None = None


class PretrainSettings(Record):
    max_steps: int


class RunSettings(Record):
    """A checkpoint folder's `run.json` (`gpt1.training.checkpoint`): the settings its
    checkpoints were written under."""

    pretrain: PretrainSettings


# -- reading and writing ----------------------------------------------------------------------

_KINDS = {type(None): "null", list: "a list", str: "a string", int: "a number",
          float: "a number", bool: "true or false"}


def _problem(err: ValidationError, sub: bool = False) -> str:
    """The first of `err`'s errors in a few words, where it lies first (`splits.train: Field
    required`); `sub`: as it reads after the key of an enclosing object (`.splits...`, or `: `
    for the object itself)."""
    errors = err.errors(include_url=False)
    first = errors[0]
    where = ".".join(str(part) for part in first["loc"])
    what = first["msg"].removeprefix("Value error, ")
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    if sub:
        return f".{where}: {what}{more}" if where else f": {what}{more}"
    return f"{where}: {what}{more}" if where else f"{what}{more}"


def check_record(raw: object, schema: type[Record]) -> str | None:
    """What is wrong with `raw` (parsed JSON) as a `schema` record; None if nothing. A `Ran`
    schema applies to a record saying `run: true`, `NotRun` to one saying `run: false`."""
    if not isinstance(raw, dict):
        return f"{_KINDS.get(type(raw), type(raw).__name__)}, not a JSON object"
    try:
        if issubclass(schema, Ran) and not _Outcome.model_validate(raw).run:
            schema = NotRun
        schema.model_validate(raw)
    except ValidationError as err:
        return _problem(err)
    return None


def read_record(path: Path, stage: str, schema: type[Record]) -> dict[str, Any]:
    """The JSON object that stage `stage` wrote to `path`, checked against `schema`. Damaged
    (cut short, emptied, not UTF-8, of another shape, a folder) it is a `RecordError` naming
    the file and the stage that writes it again; missing, a `MissingInputError`."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise MissingInputError(f"{path}: not found (run {stage} first)") from None
    except IsADirectoryError:
        raise RecordError(path, stage, "a folder") from None
    try:
        raw = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as err:
        raise RecordError(path, stage, str(err) or type(err).__name__) from None
    if (problem := check_record(raw, schema)) is not None:
        raise RecordError(path, stage, problem)
    return raw


def write_record(path: Path, record: dict[str, Any]) -> None:
    """`record` as indented JSON at `path`, atomically."""
    write_text(path, json.dumps(record, indent=2) + "\n")


def write_not_run(folder: Path, reason: str) -> None:
    """Replace `folder` (an output dvc.yaml declares) with one holding only `status.json`, which
    says the stage did not run and why: the output exists, as DVC requires, and says so."""
    with atomic_dir(folder) as tmp:
        (tmp / STATUS_FILE).write_text(json.dumps({"run": False, "reason": reason}) + "\n")


def not_run_reason(folder: Path, stage: str) -> str | None:
    """Why stage `stage`, which writes `folder`, did not run (`write_not_run`), or None if it
    ran."""
    status = folder / STATUS_FILE
    if not status.is_file():
        return None
    recorded = read_record(status, stage, Ran)
    return None if recorded["run"] else recorded["reason"]


def record_not_run(reason: str, folders: tuple[Path, ...] = (), metrics: Path | None = None,
                   **fields: Any) -> None:
    """A stage with nothing to do on these params: each of its output `folders` holds only
    `status.json` saying why, and its `metrics` file says `{**fields, "run": false, "reason":
    reason}` (what the report and `dvc metrics show` read)."""
    for folder in folders:
        write_not_run(folder, reason)
    if metrics is not None:
        write_record(metrics, {**fields, "run": False, "reason": reason})


CURVE_COLUMNS = ("epoch", "dev", "train_loss")


def write_curve(path: Path, rows: Iterable[tuple[int, float, float]]) -> None:
    """A fine-tuning curve, the TSV dvc.yaml declares a plot of (x: epoch, y: dev; what `dvc
    plots diff` sets side by side across experiments): per epoch, the task's headline dev
    figure and the training loss, each the median over seeds; the header alone for a stage that
    did not run."""
    lines = ["\t".join(CURVE_COLUMNS), *("\t".join(map(str, row)) for row in rows)]
    write_text(path, "\n".join(lines) + "\n")


def write_not_run_table(path: Path, reason: str) -> None:
    """Replace the Parquet file `path` (an output dvc.yaml declares) with one of no rows whose
    metadata says the stage did not run and why (`gpt1.not_run`)."""
    import pyarrow as pa  # imported here: the stages that read records need no pyarrow
    import pyarrow.parquet as pq

    table = pa.table({"prediction": pa.array([], pa.string())}).replace_schema_metadata(
        {"gpt1.not_run": reason})
    with atomic_file(path) as tmp:
        pq.write_table(table, tmp)
