"""Supervised fine-tuning (paper §3.2-3.3): a linear head on the final `<classify>` state, trained
on L2 + λ·L1, the task loss plus the auxiliary language-modelling loss over the task text.

An example is m token sequences (`gpt1.downstream.transforms.encode_examples`): m = 1 for
classification and
entailment, 2 for similarity (both orders), one per choice for multiple choice. A batch of B
examples is their B·m sequences, each example's consecutive, right-padded into one tensor.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import torch

from gpt1.config import Family, FinetuneTrainParams
from gpt1.model.heads import TaskModel, lm_loss_on_text
from gpt1.progress import StepProgress
from gpt1.training.device import autocast, configure_backends, resolve_device, resolve_dtype
from gpt1.training.divergence import DivergenceGuard
from gpt1.training.optim import build_optimizer, build_scheduler

log = logging.getLogger(__name__)

_SEQUENCES_PER_EXAMPLE: dict[Family, int] = {"classification": 1, "entailment": 1,
                                             "similarity": 2}
# batches per length-sorted chunk of a training epoch. Chunks of 50 batches trained worse on the
# bundled SST-2 (dev accuracy 75.5 and 86.0 for seeds 1234 and 1235, against 89.0 and 91.0 with
# 4, and 86.0 for random batches with seed 1234): batches must stay close to random samples.
BUCKET_BATCHES = 4


def pad_batch(seqs: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad to the batch's longest sequence; causal attention never sees the padding."""
    lengths = torch.tensor([len(s) for s in seqs])
    ids = torch.full((len(seqs), int(lengths.max())), pad_id, dtype=torch.long)
    for row, seq in enumerate(seqs):
        ids[row, : len(seq)] = torch.tensor(seq)
    return ids, lengths


def _per_example(family: Family, examples: list[list[list[int]]]) -> int:
    """m, the number of sequences of every example, checked against the family."""
    counts = sorted({len(e) for e in examples})
    expected = _SEQUENCES_PER_EXAMPLE.get(family)
    if len(counts) == 1 and counts[0] > 0 and expected in (None, counts[0]):
        return counts[0]
    if family == "multiple_choice":
        raise ValueError("a multiple-choice task needs the same number of choices in every "
                         f"example; these have {counts}")
    raise ValueError(f"a {family} example is {expected} sequence(s); these have {counts}")


def _flat(examples: list[list[list[int]]], idx: np.ndarray) -> list[list[int]]:
    return [seq for i in idx for seq in examples[i]]


def _batches(order: np.ndarray, batch_size: int) -> Iterator[np.ndarray]:
    for start in range(0, len(order), batch_size):
        yield order[start:start + batch_size]


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
        batches.extend(_batches(part[np.argsort(lengths[part], kind="stable")], batch_size))
    return [batches[i] for i in rng.permutation(len(batches))]


@dataclass(frozen=True)
class FinetuneResult:
    steps: int
    train_loss: float
    seconds: float


def finetune(model: TaskModel, examples: list[list[list[int]]], targets: np.ndarray, pad_id: int,
             cfg: FinetuneTrainParams,
             on_epoch: Callable[[int, TaskModel, float], None] | None = None) -> FinetuneResult:
    """Train `model` in place on (`examples`, `targets`) for `cfg.epochs` epochs of
    length-bucketed batches of `cfg.batch_size` examples (`bucketed_batches`); dropout and
    shuffling are seeded by `cfg.seed`. After each epoch,
    `on_epoch(epoch, model, the epoch's mean training loss)`."""
    per_example = _per_example(model.family, examples)
    if len(targets) != len(examples):
        raise ValueError(f"{len(targets)} targets for {len(examples)} examples")
    device = resolve_device(cfg.device)
    dtype = resolve_dtype(cfg.precision, device)
    configure_backends(device)
    torch.manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    model.to(device).train()
    widths = example_lengths(examples)
    steps_per_epoch = math.ceil(len(examples) / cfg.batch_size)
    total = steps_per_epoch * cfg.epochs
    optimizer = build_optimizer(model, cfg.lr, cfg.weight_decay, device)
    scheduler = build_scheduler(optimizer, math.ceil(cfg.warmup_fraction * total), total,
                                "linear")
    targets_t = torch.as_tensor(targets, dtype=torch.float32 if model.regression else torch.long)
    started = time.perf_counter()
    smoothed = math.nan
    step = 0
    guard = DivergenceGuard("finetune")
    with StepProgress("finetune", total, max(1, steps_per_epoch // 5), log) as progress:
        for epoch in range(cfg.epochs):
            epoch_losses = []
            for idx in bucketed_batches(widths, cfg.batch_size, rng):
                ids, lengths = pad_batch(_flat(examples, idx), pad_id)
                ids, lengths = ids.to(device), lengths.to(device)
                with autocast(device, dtype):
                    outputs, hidden = model(ids, lengths, per_example)
                    loss = model.loss(outputs, targets_t[idx].to(device))
                    if cfg.lm_coef:
                        loss = loss + cfg.lm_coef * lm_loss_on_text(model, hidden, ids, lengths)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
                optimizer.step()
                scheduler.step()
                step += 1
                value = loss.item()
                guard.check(step, value)
                epoch_losses.append(value)
                smoothed = value if math.isnan(smoothed) else 0.95 * smoothed + 0.05 * value
                progress.update(step, loss=smoothed, epoch=epoch + 1)
            if on_epoch is not None:
                on_epoch(epoch + 1, model, float(np.mean(epoch_losses)))
                model.train()
    return FinetuneResult(steps=total, train_loss=smoothed,
                          seconds=time.perf_counter() - started)


@torch.no_grad()
def predict(model: TaskModel, examples: list[list[list[int]]], pad_id: int, batch_size: int,
            device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32
            ) -> np.ndarray:
    """Outputs for every example, in order, in eval mode: (N, n_outputs) logits or scores, or
    (N, n_choices) choice logits for multiple choice. `batch_size` counts examples."""
    device = torch.device(device)
    model.to(device).eval()
    if not examples:
        width = 0 if model.family == "multiple_choice" else model.head.out_features
        return np.zeros((0, width), np.float32)
    per_example = _per_example(model.family, examples)
    # examples of similar length share a batch: less padding, and padding changes no output
    order = np.argsort(example_lengths(examples), kind="stable")
    out = []
    for idx in _batches(order, batch_size):
        ids, lengths = pad_batch(_flat(examples, idx), pad_id)
        with autocast(device, dtype):
            outputs, _ = model(ids.to(device), lengths.to(device), per_example)
        out.append(outputs.float().cpu().numpy())
    stacked = np.concatenate(out)
    result = np.empty_like(stacked)
    result[order] = stacked
    return result
