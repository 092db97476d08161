"""Fine-tuning against transformers on SST-2 and Story Cloze (issue target: >= 2x, same accuracy).

Ours is the stage's loop: `gpt1.training.finetune_loop.finetune`, then `predict`. The reference is
the loop one writes around transformers' `OpenAIGPTDoubleHeadsModel`: random batches from a shuffled
order, each padded to its longest example, the loss transformers computes (the head's cross-entropy
plus lm_coef times its LM loss over the text, padding labelled -100), fused AdamW with weight decay
off the biases and LayerNorms (transformers Trainer's default), the same clipping and learning-rate
schedule; evaluation in batches of the dev set's order, each padded to its longest. Both start from
the same weights, see the same encoded inputs (our `encode_examples`: start, delimiter and extract
tokens; a sequence per choice) and compute on one device in one precision: params.yaml's
finetune.train.device and .precision, or `--device` and `--precision` (auto: bf16 autocast where
native, else fp32). The model is params.yaml's, or a preset's with `--preset` (paper: 12 layers x
768).

    python -m bench.finetune_transformers --device cuda --precision auto --preset paper
    # for a GPU machine without spaCy: the tasks cleaned and encoded here, in one folder
    python -m bench.finetune_transformers --preset paper --prepare .ftdata
    python -m bench.finetune_transformers --device cuda --bundle .ftdata   # there
    python -m bench.finetune_transformers --profile   # and where each side's step time goes
    python -m bench.finetune_transformers --profile-only --profile-steps 1 --trace traces

Each side (and ours compiled) first runs once untimed on the same data, so that first-call costs
(CUDA's lazily loaded modules, kernel plans, the allocator's first blocks) fall in neither
side's figures; then at least three rounds, the side that starts rotating each round.

The double-heads model's multiple-choice head is ours: dropout and a linear layer on the extract
token's state (`mc_token_ids`), one scalar per choice, a softmax over the choices. A classifier
is the same head on one "choice" with an output per label.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import math
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache, partial
from pathlib import Path
from typing import Any, get_args
from unittest import mock

import numpy as np
import torch
from torch import nn
from torch.nn.utils.rnn import pad_sequence
from torch.optim.optimizer import register_optimizer_step_post_hook
from torch.profiler import record_function
from transformers import OpenAIGPTConfig, OpenAIGPTDoubleHeadsModel

from bench.common import (
    DATA,
    Table,
    alternate,
    machine,
    machine_line,
    median,
    parser,
    preset_params,
    publish,
    read_encoded,
    round_orders,
    write_encoded,
)
from bench.finetune import ROOT, SAMPLE, TARGET, Data, Side, Sizes, load_data, sizes
from bench.profiling import breakdown, breakdown_table, step_profiler, top_ops
from bench.train_step import StepClock
from gpt1.atomic import atomic_dir
from gpt1.config import (
    FinetuneTrainParams,
    PadMultiple,
    Params,
    Precision,
    TaskParams,
    load_params,
)
from gpt1.corpus.text import TextCleaner
from gpt1.corpus.tokenizer import GPT1Tokenizer, train_bpe
from gpt1.downstream.families import family_of
from gpt1.downstream.metrics import score
from gpt1.downstream.readers import holdout_split, read_task_split
from gpt1.downstream.task_model import task_model
from gpt1.downstream.transforms import encode_examples
from gpt1.interop.hf import to_hf_config, to_hf_state_dict
from gpt1.model.heads import TaskModel
from gpt1.model.transformer import GPT1, GPT1Config
from gpt1.training.device import Placement, autocast, placement
from gpt1.training.finetune_loop import finetune, predict, width_multiple
from gpt1.training.optim import build_scheduler
from gpt1.training.pretrain_loop import steady_rate

CLASSIFICATION = "sst2"
CHOICE = "story_cloze"
SIDES = ("ours", "transformers")
COMPILED = "ours compiled"
PROFILE_STEPS = 20  # training steps profiled per side (--profile), after its first
MIN_ROUNDS = 3  # timed rounds at the least: a median of fewer is one side's luck


def load_choice_data(params: Params, root: Path, s: Sizes) -> Data:
    """Story Cloze as the stage reads it (dev drawn out of the train file by the task's holdout),
    the first `s.train_examples` training stories, and a BPE learned on their texts."""
    task = params.tasks[CHOICE]
    assert task.holdout is not None, f"{CHOICE}: the registry draws its dev split by holdout"
    train, dev = holdout_split(read_task_split(task, root, "train"), task.holdout.size,
                               task.holdout.seed)
    train = train.slice(0, s.train_examples)
    if s.dev_examples is not None:
        dev = dev.slice(0, s.dev_examples)
    cleaner = TextCleaner()
    texts = train.column("context").to_pylist() + [
        choice for choices in train.column("choices").to_pylist() for choice in choices]
    tok = GPT1Tokenizer(train_bpe([cleaner(t) for t in texts], s.vocab_size, min_frequency=2))
    family = family_of(task)
    train_ids, dev_ids = (encode_examples(task, split, tok, cleaner, s.n_ctx).examples
                          for split in (train, dev))
    return Data(train_ids, family.targets(task, train), dev_ids, family.targets(task, dev), tok)


def save_bundle(folder: Path, data: dict[str, Data], task_sizes: dict[str, Sizes]) -> None:
    """Each task's encoded splits, its tokenizer and its sizes under `folder/<task>/`."""
    with atomic_dir(folder) as tmp:
        for name, d in data.items():
            (tmp / name).mkdir()
            d.tok.backend.save(str(tmp / name / "tokenizer.json"))
            write_encoded(tmp / name / "train.parquet", d.train, d.train_targets)
            write_encoded(tmp / name / "dev.parquet", d.dev, d.dev_targets)
            (tmp / name / "sizes.json").write_text(json.dumps(asdict(task_sizes[name])) + "\n")


def load_bundle(folder: Path) -> tuple[dict[str, Data], dict[str, Sizes]]:
    """What `save_bundle` wrote: the data and the sizes it was prepared for."""
    data, task_sizes = {}, {}
    for name in (CLASSIFICATION, CHOICE):
        (train, train_y), (dev, dev_y) = (read_encoded(folder / name / f"{split}.parquet")
                                          for split in ("train", "dev"))
        data[name] = Data(train, train_y, dev, dev_y,
                          GPT1Tokenizer.load(folder / name / "tokenizer.json"))
        task_sizes[name] = Sizes(**json.loads((folder / name / "sizes.json").read_text()))
    return data, task_sizes


def initial_model(task: TaskParams, cfg: FinetuneTrainParams, s: Sizes, vocab_size: int,
                  dropout: float) -> TaskModel:
    """A randomly initialised trunk and the task's head, a function of `cfg.seed` alone."""
    torch.manual_seed(cfg.seed)
    trunk = GPT1(GPT1Config(vocab_size=vocab_size, n_ctx=s.n_ctx, n_embd=s.n_embd,
                            n_layer=s.n_layer, n_head=s.n_head, embd_pdrop=dropout,
                            attn_pdrop=dropout, resid_pdrop=dropout))
    return task_model(trunk, task, cfg)


def reference_model(initial: TaskModel) -> OpenAIGPTDoubleHeadsModel:
    """`OpenAIGPTDoubleHeadsModel` holding `initial`'s weights: its trunk's, and its head's as
    the multiple-choice head's projection (after the same dropout)."""
    config = OpenAIGPTConfig(**to_hf_config(initial.trunk.config),
                             summary_first_dropout=initial.dropout.p)
    model = OpenAIGPTDoubleHeadsModel(config)
    # its __init__ fixes one output per sequence: a classifier needs one per label
    model.multiple_choice_head.summary = nn.Linear(config.n_embd, initial.head.out_features)
    trunk = to_hf_state_dict(initial.trunk)
    model.load_state_dict({**trunk, "lm_head.weight": trunk["transformer.tokens_embed.weight"],
                           "multiple_choice_head.summary.weight": initial.head.weight.detach(),
                           "multiple_choice_head.summary.bias": initial.head.bias.detach()})
    return model


def collate(examples: list[list[list[int]]], idx: np.ndarray, pad_id: int,
            device: torch.device) -> dict[str, torch.Tensor]:
    """The double-heads model's inputs for examples `idx`: (B, choices, T) ids right-padded to
    the batch's longest sequence, each sequence's extract-token index, and LM labels with the
    padding -100. No attention mask: under causal attention no real token sees the padding."""
    seqs = [torch.tensor(seq) for i in idx for seq in examples[i]]
    lengths = torch.tensor([len(seq) for seq in seqs])
    ids = pad_sequence(seqs, batch_first=True, padding_value=pad_id)
    padding = torch.arange(ids.shape[1])[None, :] >= lengths[:, None]
    shape = (len(idx), len(examples[idx[0]]), ids.shape[1])
    batch = {"input_ids": ids.view(shape), "mc_token_ids": (lengths - 1).view(shape[:2]),
             "labels": ids.masked_fill(padding, -100).view(shape)}
    return {name: tensor.to(device) for name, tensor in batch.items()}


def reference_loss(model: OpenAIGPTDoubleHeadsModel, batch: dict[str, torch.Tensor],
                   targets: torch.Tensor, lm_coef: float) -> torch.Tensor:
    """The head's cross-entropy plus `lm_coef` times the LM loss, both as transformers computes
    them (`mc_loss`, `loss`)."""
    out = model(**batch, mc_labels=targets)
    return out.mc_loss + lm_coef * out.loss


def reference_finetune(model: OpenAIGPTDoubleHeadsModel, examples: list[list[list[int]]],
                       targets: np.ndarray, pad_id: int, cfg: FinetuneTrainParams,
                       place: Placement) -> tuple[float, float]:
    """Train `model` in place for `cfg.epochs` epochs of random batches; returns the seconds the
    batches took and, of those, the first step's (as `finetune` times its own)."""
    torch.manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    model.to(place.device).train()
    params = list(model.parameters())
    optimizer = torch.optim.AdamW(
        [{"params": [p for p in params if p.dim() > 1], "weight_decay": cfg.weight_decay},
         {"params": [p for p in params if p.dim() <= 1], "weight_decay": 0.0}],
        lr=cfg.lr, fused=place.device.type in ("cuda", "cpu"))
    total = math.ceil(len(examples) / cfg.batch_size) * cfg.epochs
    scheduler = build_scheduler(optimizer, math.ceil(cfg.warmup_fraction * total), total,
                                "linear")
    targets_t = torch.as_tensor(targets)
    started = time.perf_counter()
    first_step = math.nan
    for _ in range(cfg.epochs):
        order = rng.permutation(len(examples))
        for start in range(0, len(order), cfg.batch_size):
            idx = order[start:start + cfg.batch_size]
            with record_function("data"):
                batch = collate(examples, idx, pad_id, place.device)
                batch_targets = targets_t[idx].to(place.device)
            with autocast(place.device, place.dtype):
                loss = reference_loss(model, batch, batch_targets, cfg.lm_coef)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            with record_function("optimizer"):
                torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
                optimizer.step()
                scheduler.step()
            if math.isnan(first_step):
                loss.item()  # waits for the device
                first_step = time.perf_counter() - started
    loss.item()
    return time.perf_counter() - started, first_step


@torch.no_grad()
def reference_predict(model: OpenAIGPTDoubleHeadsModel, examples: list[list[list[int]]],
                      pad_id: int, batch_size: int, place: Placement) -> np.ndarray:
    """(N, outputs) head outputs in eval mode: per label, or per choice."""
    model.to(place.device).eval()
    out = []
    for start in range(0, len(examples), batch_size):
        batch = collate(examples, np.arange(start, min(start + batch_size, len(examples))),
                        pad_id, place.device)
        with autocast(place.device, place.dtype):
            logits = model(input_ids=batch["input_ids"],
                           mc_token_ids=batch["mc_token_ids"]).mc_logits
        out.append(logits.flatten(1).float().cpu().numpy())
    return np.concatenate(out)


@dataclass(frozen=True)
class Run:
    train_seconds: float
    first_step_seconds: float  # of train_seconds
    eval_seconds: float
    outputs: np.ndarray

    def train_rate(self, examples: int, steps: int) -> float:
        """Examples per second after the first step, which loads each kernel the loop uses and
        allocates its memory: the rate a longer run keeps."""
        return examples / steps * steady_rate(steps, self.train_seconds, 1,
                                              self.first_step_seconds)


@dataclass
class TimedSide(Side):
    first_step: list[float] = field(default_factory=list)
    warmup_first_step: float = math.nan  # of the untimed run: the cold start


def run_ours(initial: TaskModel, data: Data, cfg: FinetuneTrainParams, place: Placement) -> Run:
    model = copy.deepcopy(initial)
    result = finetune(model, data.train, data.train_targets, data.tok.pad_id, cfg)
    started = time.perf_counter()
    outputs = predict(model, data.dev, data.tok.pad_id, cfg.batch_size, place.device, place.dtype,
                      cfg.pad_to_multiple)
    return Run(result.seconds, result.startup_seconds, time.perf_counter() - started, outputs)


def run_ours_compiled(initial: TaskModel, data: Data, cfg: FinetuneTrainParams,
                      place: Placement, mode: str | None = None) -> Run:
    """Ours through torch.compile (`finetune.train.compile: true`), in its `mode` (None: the
    default; reduce-overhead: CUDA graphs, recorded per batch shape): its first step compiles."""
    with mock.patch.object(torch, "compile", partial(torch.compile, mode=mode)):
        return run_ours(initial, data, cfg.model_copy(update={"compile": True}), place)


def run_reference(initial: TaskModel, data: Data, cfg: FinetuneTrainParams,
                  place: Placement) -> Run:
    model = reference_model(initial)
    seconds, first_step = reference_finetune(model, data.train, data.train_targets,
                                             data.tok.pad_id, cfg, place)
    started = time.perf_counter()
    outputs = reference_predict(model, data.dev, data.tok.pad_id, cfg.batch_size, place)
    return Run(seconds, first_step, time.perf_counter() - started, outputs)


def measure(task: TaskParams, data: Data, base: FinetuneTrainParams, s: Sizes, dropout: float,
            rounds: int, place: Placement, compiled: bool = False,
            compile_mode: str | None = None) -> dict[str, TimedSide]:
    """`rounds` alternating rounds of both sides (and ours compiled, with `compiled`), round r
    from seed `base.seed + r`: the same initial weights for every side within a round. Before
    them each side runs once, untimed, as round 0 runs (`alternate`'s warm-up): only its first
    step's seconds are kept, as the side's cold start."""
    initial = lru_cache(maxsize=1)(
        lambda seed: initial_model(task, base.model_copy(update={"seed": seed}), s,
                                   data.tok.vocab_size, dropout))
    runners = {"ours": run_ours, "transformers": run_reference}
    if compiled:
        runners[COMPILED] = partial(run_ours_compiled, mode=compile_mode)
    # no context to swap in: each side is its own loop
    sides = {name: TimedSide(nullcontext) for name in runners}
    steps = math.ceil(len(data.train) / base.batch_size)
    warm: set[str] = set()

    def once(name: str) -> float:
        side = sides[name]
        if name not in warm:  # alternate's warm-up call
            warm.add(name)
            side.warmup_first_step = runners[name](initial(base.seed), data, base,
                                                   place).first_step_seconds
            return math.nan
        cfg = base.model_copy(update={"seed": base.seed + len(side.accuracy)})
        run = runners[name](initial(cfg.seed), data, cfg, place)
        side.train_rate.append(run.train_rate(len(data.train), steps))
        side.first_step.append(run.first_step_seconds)
        side.eval_rate.append(len(data.dev) / run.eval_seconds)
        side.accuracy.append(score(["accuracy"], data.dev_targets,
                                   run.outputs.argmax(axis=1))["accuracy"])
        return side.train_rate[-1]

    alternate({name: lambda name=name: once(name) for name in runners}, rounds, warmup=True)
    return sides


@contextlib.contextmanager
def clocked_steps(clock: StepClock, device: torch.device) -> Iterator[None]:
    """Inside, each optimiser step (both sides' loops step one optimiser once a batch) is
    counted and shown to `clock`, the device synchronised first at the steps where the clock
    starts and stops, so that its seconds are the device's as well as the host's."""
    count = 0

    def after_step(*_: object) -> None:
        nonlocal count
        count += 1
        if count in (clock.warmup, clock.last) and device.type == "cuda":
            torch.cuda.synchronize(device)
        clock(count, {})

    handle = register_optimizer_step_post_hook(after_step)
    try:
        yield
    finally:
        handle.remove()


def eval_batch(name: str, initial: TaskModel, data: Data, cfg: FinetuneTrainParams,
               place: Placement) -> Callable[[], np.ndarray]:
    """Side `name` scoring one batch, the dev set's first `cfg.batch_size` examples, as its run
    scores the dev set (ours `predict`, transformers `reference_predict`), with `initial`'s
    weights: the trained model's shapes, and so its kernels."""
    examples = data.dev[:cfg.batch_size]
    if name == "ours":
        return partial(predict, copy.deepcopy(initial), examples, data.tok.pad_id,
                       cfg.batch_size, place.device, place.dtype, cfg.pad_to_multiple)
    return partial(reference_predict, reference_model(initial), examples, data.tok.pad_id,
                   cfg.batch_size, place)


def profile_call(call: Callable[[], object], device: torch.device) -> tuple[Any, float]:
    """`call()` once unrecorded (its shapes' first-call costs), then once under torch.profiler:
    that profiler and the call's seconds (both sides' scoring ends by copying its outputs to
    the host, which waits for the device)."""
    call()
    profiler = step_profiler(device)
    with profiler:
        started = time.perf_counter()
        call()
        seconds = time.perf_counter() - started
    return profiler, seconds


@dataclass
class Profile:
    """A task's profile: each side's milliseconds per training step and per eval batch in each
    category (`bench.profiling.breakdown`), their tables, and each side's costliest ops."""

    tables: list[Table]
    train_ms: dict[str, dict[str, float]] = field(default_factory=dict)
    eval_ms: dict[str, dict[str, float]] = field(default_factory=dict)
    train_ops: dict[str, str] = field(default_factory=dict)
    eval_ops: dict[str, str] = field(default_factory=dict)


def profile_sides(task: TaskParams, data: Data, cfg: FinetuneTrainParams, s: Sizes,
                  dropout: float, place: Placement, steps: int = PROFILE_STEPS,
                  trace: Path | None = None) -> Profile | None:
    """One run of each side from the same weights under torch.profiler, its training steps 2
    to `steps` + 1 (or the epoch's last) recorded, then one eval batch (`eval_batch`, after an
    unrecorded one): milliseconds per step and per batch in each category and their shares,
    and each side's costliest ops and kernels; with `trace`, each recording's Chrome trace in
    that folder (`<side>-train.json`, `<side>-eval.json`). None for an epoch of one step, which
    has nothing after its first."""
    steps = min(steps, math.ceil(len(data.train) / cfg.batch_size) - 1)
    if steps < 1:
        return None
    initial = initial_model(task, cfg, s, data.tok.vocab_size, dropout)
    result = Profile([])
    for name, runner in (("ours", run_ours), ("transformers", run_reference)):
        trained = step_profiler(place.device)
        clock = StepClock(1, steps, trained)
        with clocked_steps(clock, place.device):
            runner(initial, data, cfg, place)
        result.train_ms[name] = breakdown(trained.events(), clock.seconds, steps, place.device)
        result.train_ops[name] = top_ops(trained, place.device)
        scored, seconds = profile_call(eval_batch(name, initial, data, cfg, place), place.device)
        result.eval_ms[name] = breakdown(scored.events(), seconds, 1, place.device)
        result.eval_ops[name] = top_ops(scored, place.device)
        if trace is not None:
            trace.mkdir(parents=True, exist_ok=True)
            trained.export_chrome_trace(str(trace / f"{name}-train.json"))
            scored.export_chrome_trace(str(trace / f"{name}-eval.json"))
    train = breakdown_table(f"profile: milliseconds per training step, {task.title}",
                            result.train_ms)
    train.notes.append(f"one run of each side under torch.profiler, eager, steps 2 to "
                       f"{steps + 1} (the profiler slows small ops: the rates above are "
                       "measured without it)")
    batch = min(cfg.batch_size, len(data.dev))
    scoring = breakdown_table(f"profile: milliseconds per eval batch, {task.title}",
                              result.eval_ms)
    scoring.notes.append(f"the dev set's first {batch} examples scored as each side scores the "
                         "dev set, once unrecorded, then once under torch.profiler")
    result.tables = [train, scoring]
    return result


def spread(values: list[float]) -> float | None:
    """The sample standard deviation; None for a single value."""
    return statistics.stdev(values) if len(values) > 1 else None


def noise_note(title: str, sides: dict[str, Side], n_dev: int) -> str:
    """Whether the sides' mean accuracies differ by at most twice the standard error of the
    difference: from the seeds' spread where there are several, else from the dev set's size
    (binomial)."""
    ours, ref = (sides[name].accuracy for name in SIDES)
    diff = statistics.mean(ours) - statistics.mean(ref)
    if len(ours) > 1:
        se = math.sqrt((statistics.variance(ours) + statistics.variance(ref)) / len(ours))
        basis = f"{len(ours)} seeds' spread"
    else:
        p = statistics.mean(ours + ref) / 100
        se = 100 * math.sqrt(2 * p * (1 - p) / n_dev)
        basis = f"binomial error of {n_dev} dev examples (one seed)"
    verdict = "within noise" if abs(diff) <= 2 * se else "NOT within noise"
    return (f"{title}: ours - transformers = {diff:+.2f} points, 2 x standard error "
            f"{2 * se:.2f} ({basis}): {verdict}")


def pad_multiple(text: str) -> PadMultiple:
    """`--pad-to-multiple`'s value: auto, or a width multiple of at least 1 (1: off)."""
    if text == "auto":
        return "auto"
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"auto or an integer >= 1, not {text!r}")
    return int(text)


def options(knobs: FinetuneTrainParams) -> argparse.ArgumentParser:
    """The benchmark's options; `knobs` (params.yaml's fine-tuning) give defaults in the help."""
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--device", default=knobs.device,
                   help=f"auto | cpu | cuda | cuda:N, for both sides (default: params.yaml's "
                        f"finetune.train.device, {knobs.device})")
    p.add_argument("--precision", default=None, choices=get_args(Precision),
                   help=f"for both sides (default: finetune.train.precision of params.yaml, "
                        f"{knobs.precision}, or of --preset's)")
    p.add_argument("--pad-to-multiple", type=pad_multiple, default=None, metavar="auto|N",
                   help="ours' finetune.train.pad_to_multiple: each batch's width rounded up "
                        "to a multiple of N (1: off; auto: 64 on CUDA, 1 on the CPU) (default: "
                        f"params.yaml's, {knobs.pad_to_multiple}, or --preset's)")
    p.add_argument("--train-examples", type=int, default=1000,
                   help="SST-2 training sentences fine-tuned on for one epoch")
    p.add_argument("--choice-examples", type=int, default=400,
                   help="Story Cloze training stories fine-tuned on for one epoch")
    p.add_argument("--dev-examples", type=int, default=500, help="dev examples scored per task")
    p.add_argument("--seeds", type=int, default=3,
                   help="seeds the accuracy is compared over (rounds: max(repeats, seeds))")
    p.add_argument("--preset", default=None,
                   help="params.yaml with a gpt1 preset applied (e.g. paper: its model, batch "
                        "and learning rate)")
    p.add_argument("--compile", action="store_true",
                   help="also time ours through torch.compile (its first step, which "
                        "compiles, apart)")
    p.add_argument("--compile-mode", default=None,
                   help="torch.compile's mode for --compile (implies it), e.g. reduce-overhead "
                        "(CUDA graphs)")
    p.add_argument("--profile", action="store_true",
                   help="then profile a run of each side per task: where a training step's "
                        "and an eval batch's time goes (the timed tables are written first)")
    p.add_argument("--profile-steps", type=int, default=PROFILE_STEPS,
                   help=f"training steps --profile records per side, after its first "
                        f"(default {PROFILE_STEPS})")
    p.add_argument("--profile-only", action="store_true",
                   help="--profile without the timed rounds")
    p.add_argument("--trace", type=Path, default=None, metavar="FOLDER",
                   help="with --profile: each recording's Chrome trace, in a subfolder per task")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--prepare", type=Path, metavar="BUNDLE",
                       help="write the tasks cleaned and encoded (and their sizes) to this "
                            "folder, then stop: a GPU machine runs from it without spaCy")
    where.add_argument("--bundle", type=Path,
                       help="run from a folder --prepare wrote (its sizes, not the options')")
    return p


def task_knobs(params: Params, task: TaskParams, args: argparse.Namespace,
               precision: Precision) -> FinetuneTrainParams:
    """The fine-tuning knobs both sides run a task with: its own, for one epoch of the first
    seed, on `--device` in `precision`; ours eager (ours compiled is `--compile`'s side), its
    widths as `--pad-to-multiple` says where given."""
    update: dict[str, Any] = {"epochs": 1, "device": args.device, "precision": precision,
                              "compile": False}
    if args.pad_to_multiple is not None:
        update["pad_to_multiple"] = args.pad_to_multiple
    return params.finetune.for_task(task, params.finetune.seeds[0]).model_copy(update=update)


def timed_tables(args: argparse.Namespace, params: Params, data: dict[str, Data],
                 cfgs: dict[str, FinetuneTrainParams], task_sizes: dict[str, Sizes],
                 place: Placement, rounds: int) -> tuple[list[Table], dict[str, Any]]:
    """The rates and the accuracies of every side on each task (`measure`), and the figures the
    JSON adds: each side's cold start (its warm-up run's first step)."""
    sides_run = SIDES + ((COMPILED,) if args.compile else ())
    rates = Table("fine-tuning examples/s (median)",
                  ["task", "phase", "ours", "transformers", "ratio", "target"]
                  + ([COMPILED, "compiled ratio"] if args.compile else [])
                  + [f"{side} first step s" for side in sides_run])
    quality = Table("dev accuracy after one epoch",
                    ["task", "side", "mean", "std", "seeds", "train", "dev"])
    cold: dict[str, dict[str, float]] = {}
    for name, d in data.items():
        task = params.tasks[name]
        sides = measure(task, d, cfgs[name], task_sizes[name], params.model.dropout, rounds,
                        place, args.compile, args.compile_mode)
        cold[name] = {side: sides[side].warmup_first_step for side in sides_run}
        for phase in ("train", "eval"):
            rate = {side: median(getattr(sides[side], f"{phase}_rate")) for side in sides_run}
            extra = {f"{side} first step s": median(sides[side].first_step)
                     for side in sides_run if phase == "train"}
            if args.compile:
                extra |= {COMPILED: rate[COMPILED],
                          "compiled ratio": rate[COMPILED] / rate["transformers"]}
            rates.add(task=task.title, phase=phase, ours=rate["ours"],
                      transformers=rate["transformers"],
                      ratio=rate["ours"] / rate["transformers"], target=f">= {TARGET:g}x",
                      **extra)
        for side in sides_run:
            accuracy = sides[side].accuracy
            quality.add(task=task.title, side=side, mean=statistics.mean(accuracy),
                        std=spread(accuracy), seeds=len(accuracy), train=len(d.train),
                        dev=len(d.dev))
        quality.notes.append(noise_note(task.title, sides, len(d.dev)))
    knobs = params.finetune.train
    cfg = cfgs[CLASSIFICATION]
    rates.notes = [
        f"median of {rounds} alternating rounds, each from its own seed, after an untimed run "
        "of each side on the same data (its first step's seconds, the cold start, in the "
        "JSON); the side that starts a round rotates; 1 epoch, batch "
        f"{knobs.batch_size}, lm_coef {knobs.lm_coef}, lr {knobs.lr}; on {place.device} in "
        f"{str(place.dtype).removeprefix('torch.')} (precision {cfg.precision}; the same for "
        "both), both eager (ours compiled, with --compile: finetune.train.compile true); "
        "train: the rate after each side's first step (which loads the kernels its loop "
        "uses and allocates its memory: once a run, whatever its length), that step's "
        "seconds beside it",
        "ours: the stage's finetune + predict (length-bucketed batches, length-sorted eval, "
        f"widths rounded up to a multiple of {width_multiple(cfg.pad_to_multiple, place.device)}"
        f": pad_to_multiple {cfg.pad_to_multiple}); transformers: OpenAIGPTDoubleHeadsModel "
        "in a plain loop, random batches padded to their longest, its own mc_loss + lm_coef x "
        "LM loss",
    ]
    base = task_sizes[CLASSIFICATION]
    quality.notes.append(
        f"model n_embd {base.n_embd}, n_layer {base.n_layer}, n_head {base.n_head}, n_ctx "
        f"{base.n_ctx}, a BPE per task learned on its training text; the trunk is randomly "
        "initialised (the same weights for both sides per seed), so the accuracy checks that "
        "both sides learn alike, not GPT-1's")
    return [rates, quality], {"warmup_first_step_seconds": cold}


def main(argv: list[str] | None = None) -> Path:
    p = options(load_params(ROOT / "params.yaml").finetune.train)
    args = p.parse_args(argv)
    if args.repeats < MIN_ROUNDS:
        p.error(f"--repeats {args.repeats}: at least {MIN_ROUNDS} alternating rounds are timed")
    if args.profile_steps < 1:
        p.error(f"--profile-steps {args.profile_steps}: at least 1")
    args.profile = args.profile or args.profile_only
    if args.trace is not None and not args.profile:
        p.error("--trace: the traces are --profile's")
    params = preset_params(args.preset)
    knobs = params.finetune.train
    precision = args.precision or knobs.precision
    if args.bundle is not None:
        data, task_sizes = load_bundle(args.bundle)
    else:
        root = SAMPLE if args.tiny else DATA
        base = sizes(params, args.tiny, args.train_examples)
        if not args.tiny:
            base = replace(base, dev_examples=args.dev_examples)
        choice = base if args.tiny else replace(base, train_examples=args.choice_examples)
        task_sizes = {CLASSIFICATION: base, CHOICE: choice}
        data = {CLASSIFICATION: load_data(params, root, task_sizes[CLASSIFICATION]),
                CHOICE: load_choice_data(params, root, task_sizes[CHOICE])}
        if args.prepare is not None:
            save_bundle(args.prepare, data, task_sizes)
            print(f"written {args.prepare}: carry it beside the checkout and run "
                  f"`python -m bench.finetune_transformers --bundle {args.prepare}` there")
            return args.prepare
    place = placement(args.device, precision)
    rounds = max(args.repeats, args.seeds)
    args.compile = args.compile or args.compile_mode is not None
    cfgs = {name: task_knobs(params, params.tasks[name], args, precision) for name in data}
    pad = cfgs[CLASSIFICATION].pad_to_multiple
    sides_run = SIDES + ((COMPILED,) if args.compile else ())
    settings = {"sizes": {name: asdict(s) for name, s in task_sizes.items()},
                "repeats": args.repeats, "seeds": args.seeds, "rounds": rounds,
                "warmup": not args.profile_only,
                "round_order": [] if args.profile_only else round_orders(sides_run, rounds),
                "compile": args.compile, "compile_mode": args.compile_mode,
                "tiny": args.tiny, "epochs": 1, "batch_size": knobs.batch_size,
                "seed": params.finetune.seeds[0], "device": str(place.device),
                "precision": precision, "preset": args.preset,
                "pad_to_multiple": pad, "width_multiple": width_multiple(pad, place.device),
                "profile_only": args.profile_only,
                "bundle": None if args.bundle is None else str(args.bundle),
                "dtype": str(place.dtype).removeprefix("torch.")}
    tables: list[Table] = []
    if args.profile_only:
        print(machine_line(machine()), end="\n\n")
    else:
        tables, figures = timed_tables(args, params, data, cfgs, task_sizes, place, rounds)
        settings |= figures
        path = publish(tables, args.out, "finetune_transformers", settings)
        if not args.profile:
            return path
    settings |= {"profile_steps": args.profile_steps, "profile_ms_per_step": {},
                 "profile_top_ops": {}, "profile_eval_ms": {}, "profile_eval_top_ops": {}}
    for name, d in data.items():
        profiled = profile_sides(params.tasks[name], d, cfgs[name], task_sizes[name],
                                 params.model.dropout, place, args.profile_steps,
                                 None if args.trace is None else args.trace / name)
        if profiled is not None:
            settings["profile_ms_per_step"][name] = profiled.train_ms
            settings["profile_top_ops"][name] = profiled.train_ops
            settings["profile_eval_ms"][name] = profiled.eval_ms
            settings["profile_eval_top_ops"][name] = profiled.eval_ops
            tables += profiled.tables
            for table in profiled.tables:
                print(table.render(), end="\n\n", flush=True)
        # after each task: a run cut short keeps the tasks it profiled
        path = publish(tables, args.out, "finetune_transformers", settings, show=False)
    print(f"written {path}")
    return path


if __name__ == "__main__":
    main()
