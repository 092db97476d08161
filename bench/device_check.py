"""One-call device check: on a machine with a CUDA GPU, one command prints one table of what
matters for training GPT-1 there, each figure beside its baseline.

    # here, after `dvc repro tokenize`: the tokenizer, shards and SST-2 encoded, in one folder
    python -m bench.device_check --prepare .device
    # on the GPU machine, with .device carried beside the checkout
    python -m bench.device_check --bundle .device
    # the same code at toy sizes on the CPU (--prepare and --bundle with --tiny: a test runs it)

The bundle holds what needs spaCy (SST-2's text, cleaned as the pipeline cleans it, and
encoded with the run's BPE) done here, and the shards up to `--max-tokens` of training tokens,
so that it is small enough to carry.

Parts, in order (the paper preset's sizes: 12 layers x 768, n_ctx 512, batch 64 x 512):
- train step: `bench.train_step --compile` on random tokens, vocabulary 40,478: ours eager and
  compiled against transformers at its best (bf16 autocast where native, and compiled; the
  compiled sides where `--compile auto` compiles, on CUDA, as `pretrain.compile` does);
- pretraining: the real loop (`gpt1.training.pretrain_loop.pretrain`, `pretrain.compile: auto`) for
  `--steps` steps on the shards, the model at the tokenizer's vocabulary; val loss before and
  after, beside the unigram loss of the train split's token frequencies;
- fine-tuning: SST-2 for one epoch from that model (`gpt1.training.finetune_loop.finetune`, the
  paper preset's knobs); examples/s once started, and dev accuracy beside the majority class;
- generation: `bench.generate` on the paper-size model (ours with a KV cache against
  transformers' `generate`, logits checked within a tolerance).
Each part's peak memory: the GPU's allocated peak on CUDA, the process's peak RSS on the CPU.
The train step and generation time each side only once it has run untimed (the train step's
untimed run of each side; generation's check of our ids against transformers' logits, and a
first call of transformers' `generate`), then in at least three rounds, the side that starts
rotating each round. `--parts train-step,generation` needs no bundle.

Running it needs torch, transformers and `bench.device_wheels.ALREADY_THERE`, and beyond them
the wheels `python -m bench.device_wheels` fetches (docs/scaling.md, "GPU check"): never DVC,
Prefect or spaCy.
"""

from __future__ import annotations

import logging
import resource
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bench import generate, train_step
from bench.common import (
    REPO,
    Table,
    median,
    parser,
    preset_params,
    publish,
    read_encoded,
    write_encoded,
)
from gpt1.atomic import atomic_dir
from gpt1.config import Params
from gpt1.corpus.shards import read_verified_split, unigram_loss
from gpt1.corpus.text import TextCleaner
from gpt1.corpus.tokenizer import GPT1Tokenizer
from gpt1.downstream.families import family_of
from gpt1.downstream.metrics import score
from gpt1.downstream.readers import read_task_split
from gpt1.downstream.task_model import task_model
from gpt1.downstream.transforms import encode_examples
from gpt1.jobs.pretrain import model_config, read_manifest
from gpt1.model.transformer import GPT1
from gpt1.records import write_record
from gpt1.training.device import placement, resolve_compile, resolve_device
from gpt1.training.finetune_loop import finetune, majority_class, predict
from gpt1.training.pretrain_loop import WindowSampler, evaluate, pretrain
from tasks.paths import BPE_DIR, SHARDS_DIR

SAMPLE = REPO / "gpt1" / "sample_data"
PRESET = "paper"
TASK = "sst2"
# toy sizes for --tiny: the same code in seconds on a CPU
TINY_MODEL = {"n_ctx": 32, "n_embd": 64, "n_layer": 2, "n_head": 2}
TINY_BATCH, TINY_STEPS, TINY_EXAMPLES = 4, 6, 64
STEPS = 300  # pretraining steps: 9.8M tokens at the paper's batch, a minute on an H100
MAX_TOKENS = 20_000_000  # training tokens a bundle keeps: 40 MB of uint16 shards
# val batches scored before and after pretraining (the loop's rate counts the one after)
EVAL_BATCHES = 8
log = logging.getLogger(__name__)
PARTS = ("train-step", "pretraining", "finetuning", "generation")
COLUMNS = ["part", "run", "rate", "unit", "MFU %", "result", "peak GiB", "seconds"]


@dataclass
class Peak:
    """Peak memory and wall time of a part so far (`measured`)."""

    device: torch.device
    started: float = field(default_factory=time.perf_counter)
    gib: float = float("nan")
    seconds: float = float("nan")

    def read(self) -> None:
        """On CUDA the peak of allocated GPU memory since the part started; on the CPU the
        process's peak RSS so far (it cannot be reset)."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            self.gib = torch.cuda.max_memory_allocated(self.device) / 2**30
        else:
            self.gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 2**30
        self.seconds = time.perf_counter() - self.started


@contextmanager
def measured(device: torch.device) -> Iterator[Peak]:
    """A part's `Peak`, read as it ends (and wherever the part reads it before)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
    peak = Peak(device)
    yield peak
    peak.read()


def paper_params(tiny: bool, device: str) -> Params:
    """params.yaml with the paper preset applied as `gpt1 preset paper` applies it, on
    `device`; --tiny shrinks the model and the batch."""
    params = preset_params(PRESET)
    pretrain_knobs = {"device": device}
    finetune_knobs = {"device": device, "epochs": 1}
    if tiny:
        pretrain_knobs["batch_size"] = finetune_knobs["batch_size"] = TINY_BATCH
        params = params.model_copy(update={
            "model": params.model.model_copy(update=TINY_MODEL)})
    return params.model_copy(update={
        "pretrain": params.pretrain.model_copy(update=pretrain_knobs),
        "finetune": params.finetune.model_copy(update={
            "train": params.finetune.train.model_copy(update=finetune_knobs)})})


@dataclass
class Check:
    """The table as the parts fill it, and their figures for the JSON."""

    device: torch.device
    table: Table = field(default_factory=lambda: Table("device check", COLUMNS))
    figures: dict[str, Any] = field(default_factory=dict)

    def add(self, part: str, run: str, peak: Peak, **cells: Any) -> None:
        row = {"part": part, "run": run, **cells, "peak GiB": peak.gib, "seconds": peak.seconds}
        self.table.add(**row)
        # as each part ends, so that a check cut short still shows the parts it finished
        log.info("%s", " | ".join(f"{key} {value}" for key, value in row.items()))


def check_train_step(check: Check, tiny: bool, repeats: int, compiled: bool, profile: bool,
                     save: Callable[[], object]) -> list[Table]:
    """`bench.train_step` at the paper preset's sizes (random tokens); with `compiled`, both
    sides compiled too (`--compile`). Its rows are added, and `save()` called, once it is timed;
    with `profile`, its profile then follows, the table of which it returns."""
    setup = train_step.make_setup(None if tiny else PRESET, str(check.device), "auto", tiny,
                                  steps=10, warmup=5, compiled=compiled)

    def timed(tables: list[Table], result: dict[str, Any]) -> None:
        peak.read()
        for row in tables[0].rows:
            check.add("train step", f"{row['model']} ({row['dtype']})", peak,
                      rate=row["tokens/s"], unit="tokens/s", **{"MFU %": row["MFU %"]},
                      result=f"{row['ratio']:.2f}x the fastest transformers")
        check.figures["train_step"] = result
        save()

    with measured(check.device) as peak:
        tables, result = train_step.run(setup, repeats, curve_steps=0, profile=profile,
                                        on_timed=timed)
    check.figures["train_step"] = result
    return tables[1:]


def _first_shards(listed: list[dict[str, Any]], max_tokens: int | None) -> list[dict[str, Any]]:
    """The manifest's shards in order until they hold `max_tokens` (all for None; one at least)."""
    kept: list[dict[str, Any]] = []
    for entry in listed:
        if kept and max_tokens is not None and sum(e["tokens"] for e in kept) >= max_tokens:
            break
        kept.append(entry)
    return kept


def prepare(bundle: Path, shards: Path, bpe: Path, params: Params, root: Path,
            max_tokens: int) -> None:
    """Write the bundle a GPU machine runs the check from: `bpe`'s tokenizer, the shards in
    `shards` (the train split's first ones up to `max_tokens`, the whole val split) with their
    manifest, and SST-2's train and dev splits under `root` cleaned and encoded for the model."""
    tokenizer_path = bpe / "tokenizer.json"
    tokenizer = GPT1Tokenizer.load(tokenizer_path)
    _, manifest = read_manifest(shards, tokenizer.vocab_size, tokenizer_path)
    task = params.tasks[TASK]
    with atomic_dir(bundle) as tmp:
        (tmp / "bpe").mkdir()
        shutil.copy(tokenizer_path, tmp / "bpe" / "tokenizer.json")
        splits = {}
        for split, cap in (("train", max_tokens), ("val", None)):
            kept = _first_shards(manifest["splits"][split]["shards"], cap)
            (tmp / "shards" / split).mkdir(parents=True)
            for entry in kept:
                shutil.copy(shards / split / entry["file"], tmp / "shards" / split)
            splits[split] = {**manifest["splits"][split], "shards": kept,
                             "tokens": sum(entry["tokens"] for entry in kept)}
        write_record(tmp / "shards" / "manifest.json", {**manifest, "splits": splits})
        (tmp / TASK).mkdir()
        cleaner, family = TextCleaner(), family_of(task)
        for split in ("train", "dev"):
            table = read_task_split(task, root, split)
            write_encoded(tmp / TASK / f"{split}.parquet",
                           encode_examples(task, table, tokenizer, cleaner,
                                           params.model.n_ctx).examples,
                           family.targets(task, table))


def load_shards(bundle: Path) -> tuple[GPT1Tokenizer, list[np.ndarray], list[np.ndarray]]:
    """The bundle's tokenizer and its train and val shards, checked against its manifest."""
    tokenizer_path = bundle / "bpe" / "tokenizer.json"
    tokenizer = GPT1Tokenizer.load(tokenizer_path)
    _, manifest = read_manifest(bundle / "shards", tokenizer.vocab_size, tokenizer_path)
    splits = manifest["splits"]
    return (tokenizer, read_verified_split(bundle / "shards" / "train", splits["train"]["shards"]),
            read_verified_split(bundle / "shards" / "val", splits["val"]["shards"]))


def check_pretraining(check: Check, params: Params, tokenizer: GPT1Tokenizer,
                      train: list[np.ndarray], val: list[np.ndarray], steps: int) -> GPT1:
    """The real pretraining loop for `steps` steps (warmup a tenth of them, then cosine decay),
    the val loss measured on the same batches before and after; the model it trained."""
    knobs = params.pretrain.model_copy(update={
        "max_steps": steps, "warmup_steps": max(1, steps // 10), "eval_every": steps,
        "eval_batches": EVAL_BATCHES, "log_every": max(1, steps // 10), "snapshots": []})
    torch.manual_seed(knobs.seed)
    model = GPT1(model_config(params, tokenizer.vocab_size))
    place = placement(knobs.device, knobs.precision)
    model.to(place.device)
    # the loop's own val batches: its seed + 1 (`pretrain`)
    windows = WindowSampler(val, model.config.n_ctx, knobs.seed + 1, "val")
    before = evaluate(model, windows, knobs.eval_batches, knobs.batch_size, place.device,
                      place.dtype)
    with measured(check.device) as peak:
        result = pretrain(model, train, val, knobs)
    unigram = unigram_loss(train, val, tokenizer.vocab_size)
    check.add("pretraining", f"{steps} steps of {knobs.batch_size} x {model.config.n_ctx}, "
              f"vocab {tokenizer.vocab_size:,}", peak, rate=result.tokens_per_second,
              unit="tokens/s", **{"MFU %": 100 * result.mfu},
              result=f"val loss {before:.3f} -> {result.val_loss:.3f} (unigram {unigram:.3f}); "
                     f"first step {result.startup_seconds:.1f} s")
    check.figures["pretraining"] = {
        "steps": steps, "val_loss_before": before, "val_loss": result.val_loss,
        "unigram_val_loss": unigram, "tokens_per_second": result.tokens_per_second,
        "mfu": result.mfu, "startup_seconds": result.startup_seconds,
        "seconds": result.seconds}
    return model


def check_finetuning(check: Check, params: Params, trunk: GPT1, tokenizer: GPT1Tokenizer,
                     bundle: Path, examples: int | None) -> None:
    """SST-2 (the bundle's) for one epoch from `trunk` (its first `examples` training sentences;
    all for None), then its dev accuracy beside the majority class's."""
    task = params.tasks[TASK]
    cfg = params.finetune.for_task(task, params.finetune.seeds[0])
    (train_x, train_y), (dev_x, dev_y) = (read_encoded(bundle / TASK / f"{split}.parquet")
                                          for split in ("train", "dev"))
    train_x, train_y = train_x[:examples], train_y[:examples]
    family = family_of(task)
    model = task_model(trunk, task, cfg)
    place = placement(cfg.device, cfg.precision)
    with measured(check.device) as peak:
        result = finetune(model, train_x, train_y, tokenizer.pad_id, cfg)
    # the rate once started: the first batch's step is where torch.compile compiles
    rate = (len(train_x) - cfg.batch_size) / (result.seconds - result.startup_seconds)
    outputs = predict(model, dev_x, tokenizer.pad_id, cfg.batch_size, place.device, place.dtype)
    accuracy = score(task.metrics, dev_y, family.predictions(task, outputs))["accuracy"]
    majority = score(task.metrics, dev_y, np.full(len(dev_y), majority_class(train_y)))
    check.add("fine-tuning", f"{task.title}, 1 epoch of {len(train_x):,}, batch "
              f"{cfg.batch_size}", peak, rate=rate, unit="examples/s",
              result=f"dev accuracy {accuracy:.1f} on {len(dev_x):,} (majority class "
                     f"{majority['accuracy']:.1f}); first step {result.startup_seconds:.1f} s")
    check.figures["finetuning"] = {
        "train_examples": len(train_x), "dev_examples": len(dev_x), "examples_per_second": rate,
        "accuracy": accuracy, "majority_accuracy": majority["accuracy"],
        "startup_seconds": result.startup_seconds}


def check_generation(check: Check, tiny: bool, repeats: int) -> None:
    """`bench.generate` at the paper preset's sizes."""
    prompt, new = ((generate.TINY_PROMPT_TOKENS, generate.TINY_NEW_TOKENS) if tiny
                   else (generate.PROMPT_TOKENS, generate.NEW_TOKENS))
    cfg = generate.make_config(None if tiny else PRESET, tiny, prompt + new)
    with measured(check.device) as peak:
        _, result = generate.run(cfg, prompt, new, check.device, repeats)
    ours, theirs = (median(result["tokens_per_second"][side]) for side in ("ours", "transformers"))
    check.add("generation", "ours: sample, KV cache", peak, rate=ours, unit="new tokens/s",
              result=f"{ours / theirs:.2f}x transformers' generate; logits within "
                     f"{result['rtol']:g} of their scale")
    check.add("generation", "transformers generate", peak, rate=theirs, unit="new tokens/s",
              result=f"{result['transformers_agreed_steps']} of {new} greedy ids as ours")
    check.figures["generation"] = result


def main(argv: list[str] | None = None) -> Path:
    p = parser(__doc__.split("\n\n")[0])
    p.set_defaults(repeats=3)
    p.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    p.add_argument("--compile", choices=["auto", "true", "false"], default="auto",
                   help="also time both sides' train step compiled: auto does on CUDA, as "
                        "pretrain.compile (compiling on a CPU takes minutes and is slower)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--bundle", type=Path,
                       help="run the check from this bundle (pretraining and fine-tuning read it)")
    where.add_argument("--prepare", type=Path, metavar="BUNDLE",
                       help="write the bundle from --shards and --bpe, then stop")
    p.add_argument("--shards", type=Path, default=SHARDS_DIR,
                   help=f"a tokenize run's shards (default: the pipeline's, {SHARDS_DIR})")
    p.add_argument("--bpe", type=Path, default=BPE_DIR,
                   help=f"that run's tokenizer folder (default: the pipeline's, {BPE_DIR})")
    p.add_argument("--data-root", type=Path, default=SAMPLE,
                   help="where glue/SST-2 lies (default: the bundled sample)")
    p.add_argument("--max-tokens", type=int, default=MAX_TOKENS,
                   help="training tokens the bundle keeps (whole shards, the first ones)")
    p.add_argument("--steps", type=int, default=None,
                   help=f"pretraining steps (default {STEPS}; {TINY_STEPS} with --tiny)")
    p.add_argument("--examples", type=int, default=None,
                   help=f"SST-2 training sentences (default: all; {TINY_EXAMPLES} with --tiny)")
    p.add_argument("--profile", action="store_true",
                   help="also profile the train step's sides (bench.train_step --profile): "
                        "where each one's step time goes, and its costliest ops in the JSON")
    p.add_argument("--parts", default=",".join(PARTS),
                   help=f"which parts to run, comma-separated (default: all of {','.join(PARTS)}; "
                        "finetuning starts from pretraining's model, so it needs it)")
    args = p.parse_args(argv)
    parts = args.parts.split(",")
    if unknown := sorted(set(parts) - set(PARTS)):
        p.error(f"--parts: unknown {unknown}; the parts are {','.join(PARTS)}")
    if "finetuning" in parts and "pretraining" not in parts:
        p.error("--parts: finetuning starts from pretraining's model: name pretraining too")
    if args.prepare is None and args.bundle is None and "pretraining" in parts:
        p.error("--bundle (or --prepare): pretraining and fine-tuning run from a bundle; "
                "--parts train-step,generation need none")
    device = resolve_device(args.device)
    params = paper_params(args.tiny, str(device))
    if args.prepare is not None:
        prepare(args.prepare, args.shards, args.bpe, params, args.data_root, args.max_tokens)
        print(f"written {args.prepare}: carry it beside the checkout and run "
              f"`python -m bench.device_check --bundle {args.prepare}` there")
        return args.prepare
    steps = args.steps or (TINY_STEPS if args.tiny else STEPS)
    examples = args.examples or (TINY_EXAMPLES if args.tiny else None)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    check = Check(device)
    compiled = resolve_compile({"auto": "auto", "true": True, "false": False}[args.compile],
                               device)
    check.table.notes += [
        f"on {device}; train step and generation: median of {args.repeats} alternating "
        "repetitions on random tokens and weights, after an untimed run of each side, the "
        "side that starts a round rotating; pretraining and fine-tuning: one run each, "
        "tokens/s and examples/s once started (the first step, where torch.compile compiles, "
        "left out and shown apart)",
        "peak GiB: " + ("the GPU's allocated peak within each part" if device.type == "cuda"
                        else "the process's peak RSS so far (the CPU's cannot be reset)")
        + "; the train step's rows share one, the largest of its sides",
        "targets (issue 28, on an H100/H200): train step MFU >= 50% and >= 2.5x the fastest "
        "transformers; fine-tuning >= 2x transformers (bench.finetune_transformers)"]
    profiled: list[Table] = []

    def save(show: bool = False) -> Path:
        """The table so far: after each part, so that a check cut short keeps what it measured."""
        settings = {"device": str(device), "tiny": args.tiny, "repeats": args.repeats,
                    "parts": parts, "steps": steps, "examples": examples,
                    "bundle": None if args.bundle is None else str(args.bundle),
                    **check.figures}
        return publish([check.table, *profiled], args.out, "device_check", settings, show=show)

    if "train-step" in parts:
        profiled = check_train_step(check, args.tiny, args.repeats, compiled, args.profile, save)
    if "pretraining" in parts:
        tokenizer, train, val = load_shards(args.bundle)
        model = check_pretraining(check, params, tokenizer, train, val, steps)
        save()
        if "finetuning" in parts:
            check_finetuning(check, params, model, tokenizer, args.bundle, examples)
            save()
    if "generation" in parts:
        check_generation(check, args.tiny, args.repeats)
    return save(show=True)


if __name__ == "__main__":
    main()
