"""Supervised fine-tuning (paper §3.2-3.3): a linear head on the final `<classify>` state, trained
on L2 + λ·L1, the task loss plus the auxiliary language-modelling loss over the task text.

An example is m token sequences (`gpt1.downstream.transforms.encode_examples`): m = 1 for
classification and
entailment, 2 for similarity (both orders), one per choice for multiple choice. A batch of B
examples is their B·m sequences, each example's consecutive, right-padded into one tensor.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import torch
from torch.profiler import record_function

from gpt1.config import FinetuneTrainParams, PadMultiple
from gpt1.model.heads import TaskModel, lm_loss_on_text
from gpt1.progress import StepProgress
from gpt1.training.device import autocast, placement, resolve_compile, to_device
from gpt1.training.optim import build_optimizer, build_scheduler
from gpt1.training.step import TrainingState, TrainStep, loss_read_interval

log = logging.getLogger(__name__)

# batches per length-sorted chunk of a training epoch: few, as batches must stay close to random
# samples (longer chunks trained worse)
# measured: bench/results/findings.md ("Fine-tuning: batches per length-sorted chunk")
BUCKET_BATCHES = 4


# `pad_to_multiple: auto` on CUDA: a batch's width rounded up to a multiple of 64, so that an
# epoch meets at most n_ctx / 64 attention shapes (8 at GPT-1's 512) instead of one per batch:
# each new shape costs CUDA a new kernel plan (and a compiled step a recompile). On the CPU
# (auto: 1) every padded token is computed for nothing, and no plan is cached per shape.
CUDA_WIDTH_MULTIPLE = 64


def width_multiple(setting: PadMultiple, device: torch.device) -> int:
    """What `finetune.train.pad_to_multiple` resolves to on `device`: auto is
    `CUDA_WIDTH_MULTIPLE` on CUDA and 1 (each batch as wide as its longest sequence) elsewhere."""
    if setting == "auto":
        return CUDA_WIDTH_MULTIPLE if device.type == "cuda" else 1
    return setting


def padded_width(longest: int, multiple: int, cap: int) -> int:
    """`longest` rounded up to a multiple of `multiple`, but not past `cap` (n_ctx: the
    positions there are) unless `longest` itself is."""
    return max(longest, min(-(-longest // multiple) * multiple, cap))


def pad_batch(seqs: list[list[int]], pad_id: int, multiple: int = 1,
              cap: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad to the batch's longest sequence, rounded up to a multiple of `multiple` (at
    most `cap`: `padded_width`); causal attention never sees the padding."""
    lengths = torch.tensor([len(s) for s in seqs])
    longest = int(lengths.max())
    width = padded_width(longest, multiple, longest if cap is None else cap)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    for row, seq in enumerate(seqs):
        ids[row, : len(seq)] = torch.tensor(seq)
    return ids, lengths


def _flat(examples: list[list[list[int]]], idx: np.ndarray) -> list[list[int]]:
    return [seq for i in idx for seq in examples[i]]


def _consecutive_slices(order: np.ndarray, size: int) -> Iterator[np.ndarray]:
    """`order` cut into consecutive slices of `size` (the last one may be shorter)."""
    for start in range(0, len(order), size):
        yield order[start:start + size]


def example_lengths(examples: list[list[list[int]]]) -> np.ndarray:
    """Each example's longest sequence: the width it pads its batch to."""
    return np.array([max(len(s) for s in e) for e in examples], dtype=np.int64)


def bucketed_batches(lengths: np.ndarray, batch_size: int, rng: np.random.Generator,
                     bucket_batches: int = BUCKET_BATCHES) -> list[np.ndarray]:
    """One epoch's batches of example indices, each example in exactly one: shuffled, cut into
    chunks of `bucket_batches` batches, each chunk sorted by length and cut into batches, and
    the batches shuffled. A batch is padded to its own longest example, so batches of similar
    lengths waste little compute on padding; the chunks keep which examples meet random."""
    order = rng.permutation(len(lengths))
    chunk = batch_size * bucket_batches
    batches: list[np.ndarray] = []
    for start in range(0, len(order), chunk):
        part = order[start:start + chunk]
        batches.extend(_consecutive_slices(part[np.argsort(lengths[part], kind="stable")],
                                           batch_size))
    return [batches[i] for i in rng.permutation(len(batches))]


def _task_loss(model: TaskModel, ids: torch.Tensor, lengths: torch.Tensor, per_example: int,
               targets: torch.Tensor, lm_coef: float) -> torch.Tensor:
    """L2 + λ·L1 of a batch: the task loss, plus `lm_coef` times the LM loss over its text."""
    outputs, hidden = model(ids, lengths, per_example)
    loss = model.loss(outputs, targets)
    if lm_coef:
        loss = loss + lm_coef * lm_loss_on_text(model, hidden, ids, lengths)
    return loss


@dataclass(frozen=True)
class FinetuneResult:
    steps: int
    train_loss: float
    seconds: float  # the epochs' evaluations (`on_epoch`) included
    startup_seconds: float  # of `seconds`, the first step's, where torch.compile compiles
    # of `seconds`, the steps that met a batch shape first, each compiling its graph (0: eager)
    compile_seconds: float
    batch_shapes: int  # the distinct (rows, width) of the batches trained on
    compute: dict[str, Any]  # where it computed (`Placement.record`)


def finetune(model: TaskModel, examples: list[list[list[int]]], targets: np.ndarray, pad_id: int,
             cfg: FinetuneTrainParams,
             on_epoch: Callable[[int, TaskModel, float], None] | None = None) -> FinetuneResult:
    """Train `model` in place on (`examples`, `targets`) for `cfg.epochs` epochs of
    length-bucketed batches of `cfg.batch_size` examples (`bucketed_batches`); dropout and
    shuffling are seeded by `cfg.seed`. After each epoch,
    `on_epoch(epoch, model, the epoch's mean training loss)`."""
    per_example = model.family.sequences_per_example(examples)
    if len(targets) != len(examples):
        raise ValueError(f"{len(targets)} targets for {len(examples)} examples")
    place = placement(cfg.device, cfg.precision)
    torch.manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    model.to(place.device).train()
    widths = example_lengths(examples)
    steps_per_epoch = math.ceil(len(examples) / cfg.batch_size)
    total = steps_per_epoch * cfg.epochs
    optimizer = build_optimizer(model, cfg.lr, cfg.weight_decay, place.device)
    scheduler = build_scheduler(optimizer, math.ceil(cfg.warmup_fraction * total), total,
                                "linear")
    state = TrainingState(model, optimizer, scheduler)
    log_every = max(1, steps_per_epoch // 5)
    train_step = TrainStep(place, cfg.grad_clip, "finetune",
                           read_every=loss_read_interval(place.device, log_every))
    multiple = width_multiple(cfg.pad_to_multiple, place.device)
    n_ctx = model.trunk.config.n_ctx
    compiled = resolve_compile(cfg.compile, place.device, shapes_vary=multiple == 1)
    task_loss = _compiled_task_loss(multiple) if compiled else _task_loss
    if compiled:
        log.info("fine-tuning through torch.compile: each new batch shape compiles once")
    targets_t = torch.as_tensor(targets, dtype=torch.float32 if model.regression else torch.long)
    started = time.perf_counter()
    startup = math.nan
    compile_seconds = 0.0
    shapes: set[tuple[int, ...]] = set()
    step = 0
    with (StepProgress("finetune", total, log_every, log) as progress,
          _graph_limit(compiled, multiple, n_ctx)):
        for epoch in range(cfg.epochs):
            epoch_losses = []
            batches = bucketed_batches(widths, cfg.batch_size, rng)
            for number, idx in enumerate(batches, 1):
                with record_function("data"):
                    ids, lengths = pad_batch(_flat(examples, idx), pad_id, multiple, n_ctx)
                    new_shape = tuple(ids.shape) not in shapes
                    shapes.add(tuple(ids.shape))
                    ids, lengths, batch_targets = (to_device(t, place.device)
                                                   for t in (ids, lengths, targets_t[idx]))
                step += 1
                began = time.perf_counter()
                train_step(state, step, partial(task_loss, model, ids, lengths, per_example,
                                                batch_targets, cfg.lm_coef))
                if compiled and new_shape:
                    compile_seconds += time.perf_counter() - began
                read = train_step.read_losses(state, now=step == 1 or number == len(batches))
                epoch_losses.extend(r.loss for r in read)
                if step == 1:
                    startup = time.perf_counter() - started
                if read:
                    progress.update(step, loss=state.smoothed_loss, epoch=epoch + 1)
            if on_epoch is not None:
                on_epoch(epoch + 1, model, float(np.mean(epoch_losses)))
                model.train()
    if compiled:
        log.info("fine-tuning compiled %d batch shapes in %.1f s", len(shapes), compile_seconds)
    return FinetuneResult(steps=total, train_loss=state.smoothed_loss,
                          seconds=time.perf_counter() - started, startup_seconds=startup,
                          compile_seconds=compile_seconds, batch_shapes=len(shapes),
                          compute=place.record(compiled))


def _compiled_task_loss(multiple: int) -> Callable[..., torch.Tensor]:
    """`_task_loss` through torch.compile. With widths rounded to `multiple` > 1, a graph of fixed
    shapes per batch shape an epoch meets (`_graph_limit` of them at most), each as fast as a
    fixed-shape step compiles; with each batch as wide as its longest, one graph of dynamic
    shapes serves them all (a graph per width would recompile nearly every step)."""
    return torch.compile(_task_loss, dynamic=multiple == 1)


def _graph_limit(compiled: bool, multiple: int,
                 n_ctx: int) -> contextlib.AbstractContextManager:
    """Room for every graph of fixed shapes a bucketed epoch can meet: a width per multiple up to
    n_ctx, for full batches and for the one short batch; dynamo's default limit (8) would fall
    back to eager past it."""
    if not compiled or multiple == 1:
        return contextlib.nullcontext()
    graphs = 2 * math.ceil(n_ctx / multiple)
    return torch._dynamo.config.patch(
        recompile_limit=max(graphs, torch._dynamo.config.recompile_limit))


@torch.no_grad()
def predict(model: TaskModel, examples: list[list[list[int]]], pad_id: int, batch_size: int,
            device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32,
            pad_to_multiple: PadMultiple = "auto") -> np.ndarray:
    """Outputs for every example, in order, in eval mode: (N, n_outputs) logits or scores, or
    (N, n_choices) choice logits for multiple choice. `batch_size` counts examples. Widths are
    rounded as `pad_to_multiple` says (`width_multiple`); where they are, a short last batch is
    filled up with copies of its first example, whose outputs are dropped, so that every batch
    has one of a few shapes."""
    device = torch.device(device)
    model.to(device).eval()
    if not examples:
        width = model.family.output_width(model.head.out_features, per_example=0)
        return np.zeros((0, width), np.float32)
    per_example = model.family.sequences_per_example(examples)
    multiple = width_multiple(pad_to_multiple, device)
    n_ctx = model.trunk.config.n_ctx
    # examples of similar length share a batch: less padding, and padding changes no output
    order = np.argsort(example_lengths(examples), kind="stable")
    out = []
    for idx in _consecutive_slices(order, batch_size):
        rows = len(idx)
        if multiple > 1 and rows < batch_size:
            idx = np.concatenate([idx, np.full(batch_size - rows, idx[0])])
        ids, lengths = pad_batch(_flat(examples, idx), pad_id, multiple, n_ctx)
        with autocast(device, dtype):
            outputs, _ = model(to_device(ids, device), to_device(lengths, device), per_example)
        out.append(outputs[:rows].float())
    stacked = torch.cat(out).cpu().numpy()  # one wait for the device, at the end
    result = np.empty_like(stacked)
    result[order] = stacked
    return result


def majority_class(train_targets: np.ndarray) -> int:
    """The train split's most frequent label (or answer index); the lowest on a tie."""
    return int(np.bincount(np.asarray(train_targets, dtype=np.int64)).argmax())


Figures = dict[str, float]  # metric -> value, in percent


def summarise(metrics: list[str], splits: list[str], by_seed: dict[int, dict[str, Figures]],
              majority: dict[str, Figures] | None = None) -> dict[str, object]:
    """Fine-tuning runs, one per seed, as a metrics file holds them for `dvc metrics show`: on
    the first of `splits`, each metric's median over seeds (`accuracy`), its min and max
    (`accuracy_min`, `accuracy_max`), the majority-class score (`majority_accuracy`) where
    `majority` has it, and each seed's (`by_seed.<seed>.accuracy`); each other split the same
    under its name (`dev_mismatched.accuracy`). `by_seed`: seed -> split -> metric -> value."""

    def on(split: str) -> dict[str, object]:
        figures: dict[str, object] = {}
        for metric in metrics:
            values = [by_seed[seed][split][metric] for seed in by_seed]
            figures |= {metric: round(float(np.median(values)), 2),
                        f"{metric}_min": round(min(values), 2),
                        f"{metric}_max": round(max(values), 2)}
            if majority is not None and metric in majority.get(split, {}):
                figures[f"majority_{metric}"] = round(majority[split][metric], 2)
        figures["by_seed"] = {str(seed): {m: round(by_seed[seed][split][m], 2) for m in metrics}
                              for seed in by_seed}
        return figures

    first, *others = splits
    return {"split": first, **on(first), **{split: on(split) for split in others}}
