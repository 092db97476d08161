"""Scoring a file: `gpt1 predict` against transformers' `pipeline("text-classification")` over
the model `gpt1 export-hf` writes of the same fine-tuned folder, on the same sentiment CSV, with
the same batch size and torch threads: rows per second, alternating in one run, and every row's
label compared; in fp32, and where bf16 is native (CUDA, or a CPU with AMX or AVX512-BF16) also
ours with `--precision bf16` and the pipeline under bf16 autocast, with the share of rows whose
bf16 label is the fp32 one. Then the peak RSS of `gpt1 predict` (the CLI, a fresh process per
file) on files of 100,000 and 1,000,000 rows: it streams, so the larger file should need little
more memory.

    python -m bench.predict                   # params.yaml's model, 100,000 rows, RSS at 100k, 1M
    python -m bench.predict --rows 20000 --rss-rows 20000,200000
    # for a GPU machine without spaCy: the model and the rows, cleaned and encoded, in one folder
    python -m bench.predict --rows 100000 --prepare .predictdata
    python -m bench.predict --bundle .predictdata --device cuda   # there (no memory part)

The model is params.yaml's shape with seeded random weights (a classification head over labels
negative, positive) and a BPE learned on the bundled sample corpus; the reviews are made of the
sample corpus's sentences. Both sides clean the texts inside their timing: the exported model
reads cleaned text, so a user of the pipeline cleans each text with `TextCleaner` first, as
`gpt1 predict` does. `gpt1 predict`'s time holds everything it does: loading the model, reading,
cleaning, encoding, the forward passes and writing the output file; the pipeline's, a
`TextCleaner` over the texts (read from the CSV outside its timing) and its call. From a bundle
the texts were cleaned when it was prepared, and neither side's time holds the cleaning.
"""

from __future__ import annotations

import csv
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import torch

from bench.common import Table, alternate, median, parser, publish, read_encoded, write_encoded
from gpt1.atomic import atomic_dir
from gpt1.config import TableParams, TaskParams, load_params
from gpt1.corpus.text import TextCleaner
from gpt1.corpus.tokenizer import GPT1Tokenizer, train_bpe
from gpt1.downstream.families import FAMILIES
from gpt1.downstream.standalone import save_finetuned, task_card
from gpt1.downstream.tables import iter_batches
from gpt1.downstream.transforms import encode_examples
from gpt1.errors import InputError
from gpt1.interop.hf import export_hf
from gpt1.jobs.predict import BATCH_ROWS, predict_file
from gpt1.machine import cpu_has_native_bf16
from gpt1.model.heads import TaskModel
from gpt1.model.registry import load_config
from gpt1.model.transformer import GPT1, GPT1Config
from gpt1.model.trunk import TrunkConfig
from gpt1.training.device import autocast
from gpt1.training.finetune_loop import pad_batch

if TYPE_CHECKING:
    from transformers import Pipeline

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "gpt1" / "sample_data" / "corpus"
LABELS = ["negative", "positive"]
TEXT_COLUMN = "review"
SPEC = TaskParams(title="Reviews", family="classification", reader="table",
                  table=TableParams(columns={"text": TEXT_COLUMN}), labels=LABELS,
                  metrics=["accuracy"],
                  files={"train": "reviews/train.csv", "dev": "reviews/dev.csv"})
SEED = 1234
ROWS, RSS_ROWS, BATCH_SIZE, REPEATS = 100_000, (100_000, 1_000_000), 32, 3
TINY_MODEL = {"n_ctx": 32, "n_embd": 32, "n_layer": 1, "n_head": 2}
# the memory part's model unless --rss-same-model: params.yaml's n_ctx, narrower and shallower
RSS_MODEL = {"n_embd": 32, "n_layer": 1, "n_head": 2}
TINY_VOCAB, TINY_ROWS, TINY_RSS_ROWS = 300, 300, (200, 600)
# Random weights N(0, 0.2), LayerNorm gains near 1 and biases near 0.05, the head's bias set so
# that the labels split about evenly (`balance_head`): the probabilities spread over (0, 1), so
# agreeing on every row says something (at GPT-1's 0.02 every row is ~0.5). The fold of the
# head's bias into transformers' bias-free score needs the last LayerNorm's sum(bias/gain) away
# from 0.
INIT_STD = 0.2
CALIBRATION_ROWS = 512  # reviews of another seed that set the head's bias
# sentences per review, drawn uniformly from these: short reviews most, some longer than n_ctx
SENTENCES = (1, 1, 2, 2, 3, 3, 4, 5, 7, 10)
MULTILINE = 0.1  # the share of reviews whose sentences are on lines of their own
# a row's labels may differ only where our two probabilities are at most this far apart
NEAR_TIE = 1e-4
# |Δ probability| allowed on any row: the fold's tolerance on logits (gpt1.interop.hf) is 1e-4
PROB_TOL = 1e-4
TARGET_RSS = 1.2
# the targets: rows/s over the pipeline's in fp32; bf16's labels as fp32's (percent)
TARGET_FP32, TARGET_BF16, TARGET_AGREEMENT = 2.0, 3.0, 99.5
OURS, THEIRS = "ours", "transformers"  # the sides in fp32; in bf16, "<side> bf16"
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
# whose labels each side's are compared with: in fp32 the other side's, in bf16 its own fp32's
AGAINST = {OURS: THEIRS, f"{OURS} bf16": OURS, f"{THEIRS} bf16": THEIRS}
# a bundle's files besides its tokenizer and model folder (`save_bundle`)
BUNDLE_CSV, BUNDLE_ENCODED, BUNDLE_META = "reviews_cleaned.csv", "encoded.parquet", "bundle.json"


# -- the data --------------------------------------------------------------------------------------


def paragraphs(tiny: bool) -> list[str]:
    """The sample corpus's paragraphs, each on one line (the first book alone when `tiny`)."""
    files = sorted(CORPUS.glob("*.txt"))[:1 if tiny else None]
    return [" ".join(block.split()) for path in files
            for block in path.read_text(encoding="utf-8").split("\n\n") if block.strip()]


def sentences(texts: Iterable[str]) -> list[str]:
    """The sentences of `texts`: runs ending in . ! ? or an ellipsis, with a closing quote."""
    found = (s.strip() for text in texts
             for s in re.findall(r"[^.!?\u2026]+[.!?\u2026]+[\"'\u201d\u2019]?", text))
    return [s for s in found if len(s) > 1]


def reviews(pool: list[str], rows: int, seed: int) -> Iterator[str]:
    """`rows` seeded reviews of 1 to 10 of `pool`'s sentences; some span several lines. The
    first k of n rows are the k rows of a shorter file of the same seed."""
    rng = random.Random(seed)
    for _ in range(rows):
        picked = rng.choices(pool, k=rng.choice(SENTENCES))
        yield ("\n" if rng.random() < MULTILINE else " ").join(picked)


def write_reviews(path: Path, pool: list[str], rows: int, seed: int = SEED) -> Path:
    """A sentiment CSV of `rows` seeded reviews (`reviews`)."""
    return write_texts(path, reviews(pool, rows, seed))


def write_texts(path: Path, texts: Iterable[str]) -> Path:
    """A sentiment CSV: `id`, `review` (quoted where it holds a quote, comma or line break)."""
    with path.open("w", encoding="utf-8", newline="") as fh:
        out = csv.writer(fh, lineterminator="\n")
        out.writerow(["id", TEXT_COLUMN])
        out.writerows(enumerate(texts))
    return path


def read_texts(path: Path) -> list[str]:
    """The `review` column of `path`, read as `gpt1 predict` reads it."""
    return [text for batch in iter_batches(path, "csv", 8192)
            for text in batch.table.column(TEXT_COLUMN).to_pylist()]


# -- the model -------------------------------------------------------------------------------------


def make_config(tiny: bool, vocab_size: int, overlay: dict | None = None) -> GPT1Config:
    """params.yaml's model (or the tiny one), `overlay`'s sizes over it, over `vocab_size` ids,
    weights N(0, INIT_STD)."""
    model = {**load_params(REPO / "params.yaml").model.model_dump(),
             **(TINY_MODEL if tiny else {}), **(overlay or {})}
    return GPT1Config(vocab_size=vocab_size, n_ctx=model["n_ctx"], n_embd=model["n_embd"],
                      n_layer=model["n_layer"], n_head=model["n_head"],
                      initializer_range=INIT_STD)


def make_tokenizer(path: Path, texts: list[str], tiny: bool) -> GPT1Tokenizer:
    """A BPE of params.yaml's bpe.vocab_size (or the tiny one) learned on cleaned `texts`."""
    bpe = load_params(REPO / "params.yaml").bpe
    cleaner = TextCleaner()
    train_bpe([cleaner(t) for t in texts], TINY_VOCAB if tiny else bpe.vocab_size,
              bpe.min_frequency).save(str(path))
    return GPT1Tokenizer.load(path)


def make_model(folder: Path, tokenizer: Path, cfg: GPT1Config, pool: list[str],
               seed: int = SEED) -> Path:
    """A fine-tuned classification folder (`save_finetuned`) of seeded random weights, its head
    balanced on reviews of `pool`'s sentences."""
    torch.manual_seed(seed)
    model = TaskModel(GPT1(cfg), FAMILIES[SPEC.family], len(LABELS), dropout=0.1, seed=seed).eval()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".ln_" in name:
                p.copy_((1.0 if name.endswith("weight") else 0.05)
                        + 0.1 * torch.randn(p.shape, generator=gen))
    balance_head(model, GPT1Tokenizer.load(tokenizer),
                 list(reviews(pool, CALIBRATION_ROWS, seed + 1)))
    folder.mkdir(parents=True)
    save_finetuned(folder, model.eval(), task_card("reviews", SPEC, cfg.n_ctx, seed), tokenizer)
    return folder


@torch.no_grad()
def balance_head(model: TaskModel, tok: GPT1Tokenizer, texts: list[str]) -> None:
    """Set the head's bias so that half of `texts` are labelled each way: the median of the
    logits' difference over them, split between the two labels' biases."""
    cleaner, n_ctx = TextCleaner(), model.trunk.config.n_ctx
    ids, lengths = pad_batch([[tok.start_id, *tok.encode(cleaner(t))[:n_ctx - 2],
                               tok.classify_id] for t in texts], tok.pad_id)
    outputs, _ = model(ids, lengths, 1)
    shift = float((outputs[:, 1] - outputs[:, 0]).median())
    model.head.bias.copy_(torch.tensor([shift / 2, -shift / 2]))


# -- what the sides score --------------------------------------------------------------------------


@dataclass(frozen=True)
class Inputs:
    """What the sides score: the fine-tuned folder, the CSV `gpt1 predict` reads, its `review`
    column as the pipeline is handed it, each row as the model reads it, and whether the texts
    are cleaned already (a bundle's: then neither side cleans)."""

    model_dir: Path
    source: Path
    texts: list[str]
    encoded: list[list[list[int]]]
    cfg: TrunkConfig
    line_breaks: int  # inside the reviews as generated, before any cleaning
    cleaned: bool


class Cleaned(TextCleaner):
    """The cleaner of texts cleaned already (a bundle's): each text as it is; spaCy never loads."""

    def __call__(self, text: str, line_breaks: bool = False) -> str:
        return text


def encode(texts: list[str], tok: GPT1Tokenizer, cleaner: TextCleaner,
           n_ctx: int) -> list[list[list[int]]]:
    """Each text as `gpt1 predict` lays it out for the model (`encode_examples`): <start> text
    <classify>, the text cut to fit `n_ctx`."""
    return encode_examples(SPEC, pa.table({"text": pa.array(texts, pa.string())}), tok, cleaner,
                           n_ctx).examples


def build(folder: Path, scratch: Path, tiny: bool, rows: int) -> tuple[Inputs, list[str]]:
    """The tokenizer and the model in `folder`, a CSV of `rows` reviews in `scratch`; and the
    sentences the reviews are drawn from."""
    texts = paragraphs(tiny)
    pool = sentences(texts)
    tok = make_tokenizer(folder / "tokenizer.json", texts, tiny)
    cfg = make_config(tiny, tok.vocab_size)
    model_dir = make_model(folder / "model", folder / "tokenizer.json", cfg, pool)
    source = write_reviews(scratch / f"reviews_{rows}.csv", pool, rows)
    raw = read_texts(source)
    return Inputs(model_dir, source, raw, encode(raw, tok, TextCleaner(), cfg.n_ctx), cfg,
                  sum(t.count("\n") for t in raw), cleaned=False), pool


def save_bundle(folder: Path, tiny: bool, rows: int) -> Path:
    """`folder`: the tokenizer, the model, the reviews cleaned (`TextCleaner`) as a CSV, each row
    encoded (`write_encoded`; its target the row's id: the reviews have no gold label) and their
    count: all the sides need, spaCy's work done. The uncleaned CSV is not carried."""
    with tempfile.TemporaryDirectory(prefix="bench_predict_") as scratch, \
            atomic_dir(folder) as tmp:
        inputs, _ = build(tmp, Path(scratch), tiny, rows)
        cleaner = TextCleaner()
        write_texts(tmp / BUNDLE_CSV, (cleaner(t) for t in inputs.texts))
        write_encoded(tmp / BUNDLE_ENCODED, inputs.encoded, np.arange(len(inputs.encoded)))
        (tmp / BUNDLE_META).write_text(json.dumps(
            {"rows": rows, "tiny": tiny, "seed": SEED, "line_breaks": inputs.line_breaks}) + "\n")
    return folder


def load_bundle(folder: Path) -> Inputs:
    """What `save_bundle` wrote; spaCy is not imported. The cleaned CSV must encode, as it is, to
    the rows encoded where it was prepared: the texts both sides get are what the model read
    there."""
    meta = json.loads((folder / BUNDLE_META).read_text())
    model_dir, source = folder / "model", folder / BUNDLE_CSV
    texts = read_texts(source)
    encoded, ids = read_encoded(folder / BUNDLE_ENCODED)
    cfg = load_config(model_dir / "config.json")
    if len(texts) != meta["rows"] or not np.array_equal(ids, np.arange(meta["rows"])):
        raise InputError(f"{folder}: {len(texts)} cleaned reviews and {len(ids)} encoded rows "
                         f"for the {meta['rows']} it was prepared with: prepare it again")
    if encode(texts, GPT1Tokenizer.load(model_dir / "tokenizer.json"), Cleaned(),
              cfg.n_ctx) != encoded:
        raise InputError(f"{source}: its texts do not encode to {BUNDLE_ENCODED}: prepare it "
                         "again")
    return Inputs(model_dir, source, texts, encoded, cfg, meta["line_breaks"], cleaned=True)


# -- the sides -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scored:
    """Each row's label and the probabilities (rows, labels) of LABELS, in row order."""

    labels: list[str]
    probabilities: np.ndarray


def ours(model_dir: Path, source: Path, out: Path, batch_size: int, device: str = "cpu",
         precision: str = "fp32", cleaner: type[TextCleaner] | None = None,
         ) -> tuple[float, Scored]:
    """`predict_file` (what `gpt1 predict` runs) end to end, its texts cleaned by a fresh
    `cleaner` (its own `TextCleaner` unless given): seconds, and what it wrote."""
    started = time.perf_counter()
    predict_file(model_dir, source, out, batch_size=batch_size, device=device,
                 precision=precision, cleaner=None if cleaner is None else cleaner())
    seconds = time.perf_counter() - started
    table = pacsv.read_csv(out, parse_options=pacsv.ParseOptions(newlines_in_values=True),
                           convert_options=pacsv.ConvertOptions(include_columns=[
                               "prediction", *(f"probability_{label}" for label in LABELS)]))
    return seconds, Scored(table.column("prediction").to_pylist(), np.stack(
        [table.column(f"probability_{label}").to_numpy() for label in LABELS], axis=1))


def theirs(classify: Pipeline, texts: list[str], batch_size: int,
           dtype: torch.dtype = torch.float32,
           cleaner: type[TextCleaner] | None = None) -> tuple[float, Scored]:
    """transformers' pipeline as its user scores `texts` with the export, timed whole: each text
    cleaned by a fresh `cleaner` (a `TextCleaner` unless given: the model reads cleaned text,
    and ours cleans inside its timing), then the call, under autocast where `dtype` is below
    fp32: seconds, its scores. Truncated to the context as our fine-tuning cuts a text (its
    head, `<classify>` kept)."""
    started = time.perf_counter()
    clean = (TextCleaner if cleaner is None else cleaner)()
    cleaned = [clean(text) for text in texts]
    with autocast(classify.device, dtype):
        results = classify(cleaned, batch_size=batch_size, top_k=None, truncation=True)
    seconds = time.perf_counter() - started
    probabilities = np.array([[{d["label"]: d["score"] for d in row}[label] for label in LABELS]
                              for row in results])
    return seconds, Scored([row[0]["label"] for row in results], probabilities)


def agreement(a: list[str], b: list[str]) -> float:
    """The percentage of rows whose label in `a` is the one in `b`."""
    if len(a) != len(b) or not a:
        raise ValueError(f"labels of {len(a)} and {len(b)} rows: nothing to compare row by row")
    return 100.0 * sum(x == y for x, y in zip(a, b, strict=True)) / len(a)


@dataclass(frozen=True)
class Comparison:
    rows: int
    disagreements: int  # rows whose labels differ (each a near tie of ours, or the check fails)
    max_abs_diff: float  # the largest |Δ probability| of any row and label
    positive: int  # rows we label positive


def compare(a: Scored, b: Scored) -> Comparison:
    """Row by row: the labels equal but where our probabilities are within NEAR_TIE of each
    other, and every probability within PROB_TOL; AssertionError naming the first row not."""
    if len(a.labels) != len(b.labels):
        raise AssertionError(f"{len(a.labels)} rows scored by ours, {len(b.labels)} by theirs")
    gaps = np.abs(a.probabilities[:, 0] - a.probabilities[:, 1])
    differ = [i for i, (x, y) in enumerate(zip(a.labels, b.labels, strict=True)) if x != y]
    for row in differ:
        if gaps[row] > NEAR_TIE:
            raise AssertionError(
                f"row {row}: we label it {a.labels[row]!r} (probabilities {a.probabilities[row]}),"
                f" transformers {b.labels[row]!r} ({b.probabilities[row]}), no near tie")
    deltas = np.abs(a.probabilities - b.probabilities).max(axis=1)
    worst = int(deltas.argmax()) if len(deltas) else 0
    if len(deltas) and deltas[worst] > PROB_TOL:
        raise AssertionError(f"row {worst}: probabilities {a.probabilities[worst]} against "
                             f"transformers' {b.probabilities[worst]}: |Δ| {deltas[worst]:.3g} "
                             f"> {PROB_TOL:g}")
    return Comparison(len(a.labels), len(differ), float(deltas.max()) if len(deltas) else 0.0,
                      sum(label == LABELS[1] for label in a.labels))


def padding(lengths: list[int], batch_size: int, batch_rows: int) -> tuple[float, float]:
    """Tokens computed per real token, padding included, with sequences of `lengths` in batches
    of `batch_size`: as `gpt1 predict` batches them (each `batch_rows` rows read sorted by
    length, `gpt1.training.finetune_loop.predict`) and in the file's order (the pipeline)."""
    def padded(chunk: np.ndarray) -> int:
        return sum(int(chunk[i:i + batch_size].max()) * len(chunk[i:i + batch_size])
                   for i in range(0, len(chunk), batch_size))

    array = np.asarray(lengths)
    ours = sum(padded(np.sort(array[i:i + batch_rows], kind="stable"))
               for i in range(0, len(array), batch_rows))
    return ours / array.sum(), padded(array) / array.sum()


# -- memory ----------------------------------------------------------------------------------------


# Forks the command given as its arguments, its stdout to /dev/null, and prints the child's
# ru_maxrss (KiB) and exit status. A child's ru_maxrss counts the process it was forked from:
# Linux carries the high-water mark of the memory it replaces at exec into the new program's, so
# a CLI forked from the bench (hundreds of MiB, the pipeline's outputs among them) would report
# the bench's size. Forked from this launcher, it starts from a few MiB.
LAUNCHER = """
import os, sys
pid = os.fork()
if pid == 0:
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    os.execv(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
print(usage.ru_maxrss, os.waitstatus_to_exitcode(status))
"""


def peak_rss(command: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """`command` run to its end in a fresh process (forked from `LAUNCHER`): its peak RSS in
    MiB, the kernel's ru_maxrss of that process alone, and the seconds it took."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", LAUNCHER, *command], capture_output=True,
                          text=True, cwd=REPO, env=env)
    seconds = time.perf_counter() - started
    maxrss, _, status = done.stdout.strip().partition(" ")
    if done.returncode or status != "0":
        raise RuntimeError(f"{' '.join(command)} exited {status or done.returncode}: "
                           f"{done.stderr[-2000:]}")
    return int(maxrss) / 1024, seconds  # KiB on Linux


def predict_rss(model_dir: Path, source: Path, out: Path, batch_size: int,
                threads: int) -> tuple[float, float]:
    """`gpt1 predict` on `source` in a fresh process of `threads` torch threads
    (OMP_NUM_THREADS): its peak RSS in MiB and its seconds (`peak_rss`)."""
    return peak_rss([sys.executable, "-m", "gpt1.cli", "predict", "--model", str(model_dir),
                     "--input", str(source), "--out", str(out), "--force", "--batch-size",
                     str(batch_size), "--device", "cpu"],
                    {**os.environ, "OMP_NUM_THREADS": str(threads)})


# -- the benchmark -------------------------------------------------------------------------------


def side_name(side: str, precision: str) -> str:
    return side if precision == "fp32" else f"{side} {precision}"


def run(inputs: Inputs, tmp: Path, batch_size: int, threads: int, repeats: int,
        device: str = "cpu", bf16: bool = False) -> tuple[Table, dict]:
    """Both sides in fp32 (and in bf16 where `bf16`) on `device`, alternating, `repeats` times:
    the speed table and what the result file records of it."""
    from transformers import pipeline
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    torch.set_num_threads(threads)
    export = export_hf(inputs.model_dir, tmp / "hf")
    classify = pipeline("text-classification", model=str(export), tokenizer=str(export),
                        device=torch.device(device), batch_size=batch_size)
    cleaner = Cleaned if inputs.cleaned else None
    rows = len(inputs.texts)
    runs: dict[str, list[Scored]] = {}

    def side(name: str, measure: Callable[[], tuple[float, Scored]]) -> Callable[[], float]:
        def once() -> float:
            seconds, scored = measure()
            runs.setdefault(name, []).append(scored)
            return rows / seconds
        return once

    sides: dict[str, Callable[[], float]] = {}
    for precision in ("fp32", "bf16") if bf16 else ("fp32",):
        sides[side_name(OURS, precision)] = side(side_name(OURS, precision), partial(
            ours, inputs.model_dir, inputs.source, tmp / "scored.csv", batch_size, device,
            precision, cleaner))
        sides[side_name(THEIRS, precision)] = side(side_name(THEIRS, precision), partial(
            theirs, classify, inputs.texts, batch_size, DTYPES[precision], cleaner))
    rates = alternate(sides, repeats)
    # each repetition's rows checked against the other side's of the same repetition
    check = [compare(a, b) for a, b in zip(runs[OURS], runs[THEIRS], strict=True)][-1]
    agree = {OURS: fp32_agreement(check)}
    if bf16:
        agree |= {side_name(s, "bf16"): agreement(runs[side_name(s, "bf16")][-1].labels,
                                                  runs[s][-1].labels) for s in (OURS, THEIRS)}
    speed = speed_table(inputs, {name: median(v) for name, v in rates.items()}, agree,
                        batch_size, threads)
    pad_ours, pad_theirs = padding([len(sequences[0]) for sequences in inputs.encoded],
                                   batch_size, BATCH_ROWS)
    speed.notes = [
        f"median of {repeats} alternating repetitions on {device}; {rows:,} reviews of 1 to 10 "
        f"sample-corpus sentences in one CSV ({inputs.line_breaks:,} line breaks inside quoted "
        "reviews), the same batch size and torch threads for every side; random weights "
        f"N(0, {INIT_STD:g}), seed {SEED}; ratio: rows/s over the pipeline's in fp32; ratio, "
        "same precision: over the pipeline's in the side's precision",
        timing_note(inputs.cleaned), labels_note(check, agree),
        f"tokens computed per real token, padding included: ours {pad_ours:.2f} (each "
        f"{BATCH_ROWS:,} rows read are batched by length), the pipeline's {pad_theirs:.2f} "
        "(batches in the file's order)",
        *target_notes(speed, check, agree)]
    result = {"rows_per_second": rates, "disagreements": check.disagreements,
              "max_abs_probability_diff": check.max_abs_diff, "positive_rows": check.positive,
              "label_agreement_pct": {f"{name} vs {AGAINST[name]}": pct
                                      for name, pct in agree.items()},
              "bf16_measured": bf16, "cleaned_beforehand": inputs.cleaned,
              "init_std": INIT_STD, "near_tie": NEAR_TIE, "prob_tol": PROB_TOL,
              "vocab_size": inputs.cfg.vocab_size, "padded_per_real_token": {
                  "ours": pad_ours, "transformers": pad_theirs}}
    return speed, result


def fp32_agreement(check: Comparison) -> float:
    """The percentage of rows whose label is the same on both sides in fp32."""
    return 100.0 * (check.rows - check.disagreements) / check.rows


def speed_table(inputs: Inputs, rate: dict[str, float], agree: dict[str, float],
                batch_size: int, threads: int) -> Table:
    """The rows/s of each side (`rate`, by side name), its ratios, and how its labels agree
    (`agree`: ours fp32 with the pipeline, each bf16 side with its own fp32)."""
    rows, cleaned = len(inputs.texts), inputs.cleaned
    title = (f"predict: {rows:,} reviews cleaned beforehand (a bundle: neither side's time "
             f"holds the cleaning), {describe(inputs.cfg)}" if cleaned
             else f"predict: {rows:,} reviews, {describe(inputs.cfg)}")
    table = Table(title, ["side", "precision", "rows", "batch size", "torch threads", "rows/s",
                          "ratio", "ratio, same precision", "labels agree", "target"])
    labels = {OURS: f"ours: gpt1 predict (read, {'' if cleaned else 'clean, '}encode, forward, "
                    "write)",
              THEIRS: f"transformers: {'' if cleaned else 'TextCleaner, then '}pipeline("
                      "'text-classification') on the export"}
    targets = {OURS: f">= {TARGET_FP32:g}x, labels identical",
               side_name(OURS, "bf16"): f">= {TARGET_BF16:g}x, labels >= {TARGET_AGREEMENT:g}%"}
    for name in rate:
        side, _, precision = name.partition(" ")
        precision = precision or "fp32"
        autocast_note = " under bf16 autocast" if side == THEIRS and precision == "bf16" else ""
        table.add(side=labels[side] + autocast_note, precision=precision, rows=rows, **{
            "batch size": batch_size, "torch threads": threads, "rows/s": rate[name],
            "ratio": rate[name] / rate[THEIRS],
            "ratio, same precision": rate[name] / rate[side_name(THEIRS, precision)],
            "labels agree": f"{agree[name]:.2f}%" if name in agree else None,
            "target": targets.get(name)})
    return table


def timing_note(cleaned: bool) -> str:
    """What each side's time holds."""
    if cleaned:
        return ("the reviews were cleaned (TextCleaner: ftfy + spaCy) and encoded where the "
                "bundle was prepared; ours is timed end to end but for that (load the folder, "
                "read the cleaned CSV, BPE, forward, write the output CSV), the pipeline over "
                "its call alone (texts, batch_size, top_k=None, truncation=True); the cleaned "
                "CSV encodes to the rows encoded there (checked)")
    return ("ours is timed end to end (load the folder, read the CSV, ftfy + spaCy cleaning, "
            "BPE, forward, write the output CSV); the pipeline over what its user runs: "
            "TextCleaner (ftfy + spaCy: the export reads cleaned text) over the texts, then its "
            "call (texts, batch_size, top_k=None, truncation=True); its texts are read from the "
            "CSV outside its timing")


def labels_note(check: Comparison, agree: dict[str, float]) -> str:
    """How the labels were compared, and how they agree."""
    note = (f"labels compared row by row on every repetition: {check.disagreements} of "
            f"{check.rows:,} rows differ between the sides in fp32 (allowed only where our two "
            f"probabilities are within {NEAR_TIE:g}); max |Δ probability| "
            f"{check.max_abs_diff:.2g} (allowed {PROB_TOL:g}); we label {check.positive:,} rows "
            f"positive, {check.rows - check.positive:,} negative; labels agree: ours fp32 "
            "against the pipeline in fp32")
    if len(agree) > 1:
        return note + ("; each bf16 side (ours: --precision bf16; the pipeline's call under "
                       "torch.autocast bfloat16) against its own fp32 labels, every row")
    return note + ("; bf16 not measured: no CUDA here, and this CPU has no native bf16 (AMX or "
                   "AVX512-BF16), where gpt1 predict refuses --precision bf16")


def target_notes(speed: Table, check: Comparison, agree: dict[str, float]) -> list[str]:
    """Whether ours meets each target: fp32, and bf16 where measured."""
    ratio = {row["precision"]: row["ratio"] for row in speed.rows
             if row["side"].startswith("ours")}
    met = {"fp32": ratio["fp32"] >= TARGET_FP32 and not check.disagreements}
    notes = [f"target: ours fp32 >= {TARGET_FP32:g}x the pipeline in fp32 with identical labels "
             f"({'met' if met['fp32'] else 'not met'}: {ratio['fp32']:.2f}x, "
             f"{check.disagreements} rows differ)"]
    if "bf16" in ratio:
        bf16 = agree[side_name(OURS, "bf16")]
        met["bf16"] = ratio["bf16"] >= TARGET_BF16 and bf16 >= TARGET_AGREEMENT
        notes.append(f"target: ours bf16 >= {TARGET_BF16:g}x the pipeline in fp32 with >= "
                     f"{TARGET_AGREEMENT:g}% of its labels ours fp32's ("
                     f"{'met' if met['bf16'] else 'not met'}: {ratio['bf16']:.2f}x, "
                     f"{bf16:.2f}%)")
    return notes


def memory_part(tmp: Path, inputs: Inputs, pool: list[str], tiny: bool,
                rss_rows: tuple[int, ...], batch_size: int, threads: int, rss_same_model: bool,
                result: dict) -> Table:
    """The memory table (`memory`), of the smaller model unless `rss_same_model`: 1M rows
    through params.yaml's model take about 9 minutes on 2 cores (the smaller one's about 4), and
    what streaming keeps in memory does not grow with the width (the weights themselves: a few
    MiB at params.yaml's shape)."""
    small = make_config(tiny, inputs.cfg.vocab_size, RSS_MODEL)
    if rss_same_model or small == inputs.cfg:
        rss_dir, title = inputs.model_dir, describe(inputs.cfg)
    else:
        rss_dir = make_model(tmp / "rss_model", tmp / "tokenizer.json", small, pool)
        title = (f"a smaller model than above, {describe(small)} (the memory of "
                 "streaming does not grow with the model's width)")
    return memory(tmp, rss_dir, pool, rss_rows, batch_size, threads, title, result)


def describe(cfg: TrunkConfig) -> str:
    return (f"{cfg.n_layer} layer{'s' if cfg.n_layer != 1 else ''} x {cfg.n_embd}, "
            f"{cfg.n_head} heads, n_ctx {cfg.n_ctx}, vocab {cfg.vocab_size}")


def memory(tmp: Path, model_dir: Path, pool: list[str], rss_rows: tuple[int, ...],
           batch_size: int, threads: int, title: str, result: dict) -> Table:
    """Peak RSS of `gpt1 predict` on files of each of `rss_rows` rows (the first rows of the
    largest file), each in a fresh process; the ratio of each to the smallest's."""
    largest = write_reviews(tmp / "rss_largest.csv", pool, max(rss_rows))
    table = Table(f"predict memory: gpt1 predict's peak RSS, {title}",
                  ["rows", "input MiB", "peak RSS MiB", "seconds", "ratio"])
    peaks = {}
    for n in sorted(rss_rows):
        source = largest if n == max(rss_rows) else write_reviews(tmp / f"rss_{n}.csv", pool, n)
        peaks[n], seconds = predict_rss(model_dir, source, tmp / "rss_out.csv", batch_size,
                                        threads)
        table.add(rows=n, **{"input MiB": source.stat().st_size / 2**20,
                             "peak RSS MiB": peaks[n], "seconds": seconds,
                             "ratio": peaks[n] / peaks[min(rss_rows)]})
    worst = max(peaks.values()) / peaks[min(rss_rows)]
    table.notes += [
        f"the CLI (`python -m gpt1.cli predict --batch-size {batch_size} --device cpu`, "
        f"OMP_NUM_THREADS={threads}) in a fresh process per file, CSV in and out, the files "
        "the first rows of one file; peak RSS: the kernel's ru_maxrss of that process (forked "
        "from a small launcher, not from the bench); seconds: "
        "the whole process, its start included; ratio: against the smallest file's peak",
        f"target: peak RSS at {max(rss_rows):,} rows <= {TARGET_RSS:g}x the peak at "
        f"{min(rss_rows):,} ({'met' if worst <= TARGET_RSS else 'not met'}: {worst:.3f}x)"]
    result["peak_rss_mib"] = {str(n): peak for n, peak in peaks.items()}
    return table


def main(argv: list[str] | None = None) -> Path:
    p = parser(__doc__.split("\n\n")[0])
    p.set_defaults(repeats=REPEATS)
    p.add_argument("--rows", type=int, default=None,
                   help=f"reviews scored by both sides (default {ROWS:,}; --tiny {TINY_ROWS})")
    p.add_argument("--rss-rows", default=None,
                   help="comma-separated file sizes whose peak RSS is measured (default "
                        f"{','.join(map(str, RSS_ROWS))}; none: skip)")
    p.add_argument("--rss-same-model", action="store_true",
                   help="measure the memory with the speed's model, not a smaller one")
    p.add_argument("--batch-size", type=int, default=BATCH_SIZE)
    p.add_argument("--threads", type=int, default=torch.get_num_threads(),
                   help="torch threads of both sides (default: torch's)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="where the timed sides compute (the memory part: the CPU); bf16 is "
                        "measured too on cuda, and on a CPU with native bf16")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--prepare", type=Path, metavar="BUNDLE",
                       help="write the model and the reviews, cleaned and encoded, to this "
                            "folder, then stop: a machine without spaCy runs from it")
    where.add_argument("--bundle", type=Path, metavar="BUNDLE",
                       help="run from a folder --prepare wrote: its reviews, not --rows'; "
                            "nothing is cleaned, and no memory part (the CLI cleans)")
    args = p.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: CUDA is not available here")
    if args.bundle is not None and args.rss_rows:
        p.error("--rss-rows: the memory part runs gpt1 predict's CLI, which cleans with spaCy: "
                "not with --bundle")
    rows = args.rows or (TINY_ROWS if args.tiny else ROWS)
    if args.prepare is not None:
        save_bundle(args.prepare, args.tiny, rows)
        print(f"written {args.prepare}: carry it beside the checkout and run "
              f"`python -m bench.predict --bundle {args.prepare} --device cuda` there")
        return args.prepare
    rss_rows = (() if args.bundle is not None else
                tuple(int(n) for n in args.rss_rows.split(",") if n.strip())
                if args.rss_rows is not None else TINY_RSS_ROWS if args.tiny else RSS_ROWS)
    bf16 = args.device == "cuda" or cpu_has_native_bf16()
    before = torch.get_num_threads()
    try:
        with tempfile.TemporaryDirectory(prefix="bench_predict_") as scratch:
            tmp = Path(scratch)
            inputs, pool = ((load_bundle(args.bundle), None) if args.bundle is not None
                            else build(tmp, tmp, args.tiny, rows))
            speed, result = run(inputs, tmp, args.batch_size, args.threads, args.repeats,
                                args.device, bf16)
            tables = [speed]
            if rss_rows and pool is not None:
                tables.append(memory_part(tmp, inputs, pool, args.tiny, rss_rows,
                                          args.batch_size, args.threads, args.rss_same_model,
                                          result))
    finally:
        torch.set_num_threads(before)
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    return publish(tables, args.out, "predict", {**settings, "rows": len(inputs.texts),
                                                  "rss_rows": list(rss_rows), **result})


if __name__ == "__main__":
    main()
