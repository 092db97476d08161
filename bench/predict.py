"""Scoring a file: `gpt1 predict` against transformers' `pipeline("text-classification")` over
the model `gpt1 export-hf` writes of the same fine-tuned folder, on the same sentiment CSV, with
the same batch size and torch threads: rows per second, alternating in one run, and every row's
label compared. Then the peak RSS of `gpt1 predict` (the CLI, a fresh process per file) on files
of 100,000 and 1,000,000 rows: it streams, so the larger file should need little more memory.

    python -m bench.predict                   # params.yaml's model, 100,000 rows, RSS at 100k, 1M
    python -m bench.predict --rows 20000 --rss-rows 20000,200000

The model is params.yaml's shape with seeded random weights (a classification head over labels
negative, positive) and a BPE learned on the bundled sample corpus; the reviews are made of the
sample corpus's sentences. The pipeline is handed text already cleaned (`TextCleaner`, as the
model reads it), outside its timing; `gpt1 predict`'s time holds everything it does: loading
the model, reading, cleaning, encoding, the forward passes and writing the output file.
"""

from __future__ import annotations

import csv
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.csv as pacsv
import torch

from bench.common import Table, alternate, median, parser, publish
from gpt1.config import TableParams, TaskParams, load_params
from gpt1.corpus.text import TextCleaner
from gpt1.corpus.tokenizer import GPT1Tokenizer, train_bpe
from gpt1.downstream.families import FAMILIES
from gpt1.downstream.standalone import save_finetuned, task_card
from gpt1.downstream.tables import iter_batches
from gpt1.interop.hf import export_hf
from gpt1.jobs.predict import BATCH_ROWS, predict_file
from gpt1.model.heads import TaskModel
from gpt1.model.transformer import GPT1, GPT1Config
from gpt1.training.finetune_loop import pad_batch

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
TARGET_RATIO, TARGET_RSS = 3.0, 1.2


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
    """A sentiment CSV: `id`, `review` (quoted where it holds a quote, comma or line break)."""
    with path.open("w", encoding="utf-8", newline="") as fh:
        out = csv.writer(fh, lineterminator="\n")
        out.writerow(["id", TEXT_COLUMN])
        out.writerows(enumerate(reviews(pool, rows, seed)))
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


# -- the two sides ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scored:
    """Each row's label and the probabilities (rows, labels) of LABELS, in row order."""

    labels: list[str]
    probabilities: np.ndarray


def ours(model_dir: Path, source: Path, out: Path, batch_size: int) -> tuple[float, Scored]:
    """`predict_file` (what `gpt1 predict` runs) end to end: seconds, and what it wrote."""
    started = time.perf_counter()
    predict_file(model_dir, source, out, batch_size=batch_size, device="cpu")
    seconds = time.perf_counter() - started
    table = pacsv.read_csv(out, parse_options=pacsv.ParseOptions(newlines_in_values=True),
                           convert_options=pacsv.ConvertOptions(include_columns=[
                               "prediction", *(f"probability_{label}" for label in LABELS)]))
    return seconds, Scored(table.column("prediction").to_pylist(), np.stack(
        [table.column(f"probability_{label}").to_numpy() for label in LABELS], axis=1))


def theirs(classify, texts: list[str], batch_size: int) -> tuple[float, Scored]:
    """transformers' pipeline over cleaned `texts`, the call alone timed: seconds, its scores.
    Truncated to the context as our fine-tuning cuts a text (its head, `<classify>` kept)."""
    started = time.perf_counter()
    results = classify(texts, batch_size=batch_size, top_k=None, truncation=True)
    seconds = time.perf_counter() - started
    probabilities = np.array([[{d["label"]: d["score"] for d in row}[label] for label in LABELS]
                              for row in results])
    return seconds, Scored([row[0]["label"] for row in results], probabilities)


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
                     "--input", str(source), "--out", str(out), "--batch-size",
                     str(batch_size), "--device", "cpu"],
                    {**os.environ, "OMP_NUM_THREADS": str(threads)})


# -- the benchmark -------------------------------------------------------------------------------


def run(tmp: Path, tiny: bool, rows: int, rss_rows: tuple[int, ...], batch_size: int,
        threads: int, repeats: int, rss_same_model: bool = False) -> tuple[list[Table], dict]:
    from transformers import pipeline
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    torch.set_num_threads(threads)
    texts = paragraphs(tiny)
    pool = sentences(texts)
    tok = make_tokenizer(tmp / "tokenizer.json", texts, tiny)
    cfg = make_config(tiny, tok.vocab_size)
    model_dir = make_model(tmp / "model", tmp / "tokenizer.json", cfg, pool)
    export = export_hf(model_dir, tmp / "hf")
    source = write_reviews(tmp / f"reviews_{rows}.csv", pool, rows)
    cleaner, raw = TextCleaner(), read_texts(source)
    cleaned = [cleaner(t) for t in raw]  # outside the pipeline's timing
    classify = pipeline("text-classification", model=str(export), tokenizer=str(export),
                        device=-1, batch_size=batch_size)
    comparisons: list[Comparison] = []
    scored: dict[str, Scored] = {}

    def side(name: str, seconds_scored: tuple[float, Scored]) -> float:
        seconds, scored[name] = seconds_scored
        if len(scored) == 2:  # each repetition's rows checked against the other side's latest
            comparisons.append(compare(scored["ours"], scored["transformers"]))
        return rows / seconds

    rows_s = alternate({
        "ours": lambda: side("ours", ours(model_dir, source, tmp / "scored.csv", batch_size)),
        "transformers": lambda: side("transformers", theirs(classify, cleaned, batch_size)),
    }, repeats)
    check = comparisons[-1]
    ours_med, hf_med = median(rows_s["ours"]), median(rows_s["transformers"])
    ratio = ours_med / hf_med
    speed = Table(f"predict: {rows:,} reviews, {describe(cfg)}",
                  ["side", "rows", "batch size", "torch threads", "rows/s", "ratio"])
    speed.add(side="ours: gpt1 predict (predict_file: read, clean, encode, forward, write)",
              rows=rows, **{"batch size": batch_size, "torch threads": threads,
                            "rows/s": ours_med, "ratio": ratio})
    speed.add(side="transformers pipeline('text-classification') on the export (call only)",
              rows=rows, **{"batch size": batch_size, "torch threads": threads,
                            "rows/s": hf_med, "ratio": 1.0})
    lines = sum(t.count("\n") for t in raw)
    # <start> text <classify>, the text cut to fit n_ctx
    pad_ours, pad_theirs = padding([min(len(ids) + 2, cfg.n_ctx) for ids in tok.encode_batch(
        cleaned)], batch_size, BATCH_ROWS)
    speed.notes += [
        f"median of {repeats} alternating repetitions, CPU, fp32; the same CSV ({rows:,} "
        f"reviews of 1 to 10 sample-corpus sentences, {lines:,} line breaks inside quoted "
        f"reviews), the same batch size and torch threads for both; random weights "
        f"N(0, {INIT_STD:g}), seed {SEED}",
        "ours is timed end to end (load the folder, read the CSV, ftfy + spaCy cleaning, BPE, "
        "forward, write the output CSV); the pipeline is given the texts already cleaned and "
        "read, outside its timing, and is timed over its call alone (texts, batch_size, "
        "top_k=None, truncation=True): this favours the pipeline",
        f"labels compared row by row on every repetition: {check.disagreements} of "
        f"{check.rows:,} rows differ (allowed only where our two probabilities are within "
        f"{NEAR_TIE:g}); max |Δ probability| {check.max_abs_diff:.2g} (allowed {PROB_TOL:g}); "
        f"we label {check.positive:,} rows positive, {check.rows - check.positive:,} negative",
        f"tokens computed per real token, padding included: ours {pad_ours:.2f} (each "
        f"{BATCH_ROWS:,} rows read are batched by length), the pipeline's {pad_theirs:.2f} "
        "(batches in the file's order)",
        f"target: ratio >= {TARGET_RATIO:g}x ({'met' if ratio >= TARGET_RATIO else 'not met'}: "
        f"{ratio:.2f}x)"]
    result = {"rows_per_second": rows_s, "disagreements": check.disagreements,
              "max_abs_probability_diff": check.max_abs_diff, "positive_rows": check.positive,
              "init_std": INIT_STD, "near_tie": NEAR_TIE, "prob_tol": PROB_TOL,
              "vocab_size": cfg.vocab_size, "padded_per_real_token": {
                  "ours": pad_ours, "transformers": pad_theirs}}
    tables = [speed]
    if rss_rows:
        # the smaller model unless asked: 1M rows through params.yaml's model take about 9
        # minutes on 2 cores (the smaller one's about 4), and what streaming keeps in memory does
        # not grow with the width (the weights themselves: a few MiB at params.yaml's shape)
        small = make_config(tiny, tok.vocab_size, RSS_MODEL)
        if rss_same_model or small == cfg:
            rss_dir, title = model_dir, describe(cfg)
        else:
            rss_dir = make_model(tmp / "rss_model", tmp / "tokenizer.json", small, pool)
            title = (f"a smaller model than above, {describe(small)} (the memory of "
                     "streaming does not grow with the model's width)")
        tables.append(memory(tmp, rss_dir, pool, rss_rows, batch_size, threads, title, result))
    return tables, result


def describe(cfg: GPT1Config) -> str:
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
    args = p.parse_args(argv)
    rows = args.rows or (TINY_ROWS if args.tiny else ROWS)
    rss_rows = (tuple(int(n) for n in args.rss_rows.split(",") if n.strip())
                if args.rss_rows is not None else TINY_RSS_ROWS if args.tiny else RSS_ROWS)
    before = torch.get_num_threads()
    try:
        with tempfile.TemporaryDirectory(prefix="bench_predict_") as tmp:
            tables, result = run(Path(tmp), args.tiny, rows, rss_rows, args.batch_size,
                                 args.threads, args.repeats, args.rss_same_model)
    finally:
        torch.set_num_threads(before)
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    return publish(tables, args.out, "predict", {**settings, "rows": rows,
                                                  "rss_rows": list(rss_rows), **result})


if __name__ == "__main__":
    main()
