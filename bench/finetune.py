"""Fine-tuning throughput on SST-2 (issue target: >= 2x, same metrics).

Ours is `gpt1.training.finetune_loop` as it is: length-bucketed training batches and length-sorted
evaluation
batches, each padded to its own longest example. The baseline is what fine-tuning code commonly
does: random batches, every one padded to the longest example of the data set. The baseline runs
the very same training and evaluation loops with their batching and padding swapped out, so the
padding is the only difference measured.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from unittest import mock

import numpy as np
import torch
import torch.nn.functional as F

import gpt1.training.finetune_loop
from bench.common import DATA, Table, alternate, median, parser, publish
from gpt1.config import FinetuneTrainParams, Params, load_params
from gpt1.corpus.text import TextCleaner
from gpt1.corpus.tokenizer import GPT1Tokenizer, train_bpe
from gpt1.downstream.families import family_of
from gpt1.downstream.metrics import score
from gpt1.downstream.readers import read_task_split
from gpt1.downstream.task_model import task_model
from gpt1.downstream.transforms import encode_examples
from gpt1.model.transformer import GPT1, GPT1Config
from gpt1.training.finetune_loop import (
    bucketed_batches,
    example_lengths,
    finetune,
    pad_batch,
    predict,
)

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "gpt1" / "sample_data"
TASK = "sst2"
TARGET = 2.0


@dataclass(frozen=True)
class Sizes:
    train_examples: int
    dev_examples: int | None  # None: the whole dev set
    vocab_size: int
    n_ctx: int
    n_embd: int
    n_layer: int
    n_head: int


def sizes(params: Params, tiny: bool, train_examples: int) -> Sizes:
    """The tiny smoke sizes, or params.yaml's model with a vocabulary SST-2 alone can fill."""
    if tiny:
        return Sizes(train_examples=64, dev_examples=64, vocab_size=300, n_ctx=64, n_embd=32,
                     n_layer=1, n_head=2)
    m = params.model
    return Sizes(train_examples=train_examples, dev_examples=None, vocab_size=4000,
                 n_ctx=m.n_ctx, n_embd=m.n_embd, n_layer=m.n_layer, n_head=m.n_head)


@dataclass(frozen=True)
class Data:
    train: list[list[list[int]]]
    train_targets: np.ndarray
    dev: list[list[list[int]]]
    dev_targets: np.ndarray
    tok: GPT1Tokenizer


def load_data(params: Params, root: Path, s: Sizes) -> Data:
    """SST-2's first `train_examples` training sentences, the dev set, and a BPE learned on
    those training sentences (no pretrained tokenizer is needed)."""
    task = params.tasks[TASK]
    train = read_task_split(task, root, "train").slice(0, s.train_examples)
    dev = read_task_split(task, root, "dev")
    if s.dev_examples is not None:
        dev = dev.slice(0, s.dev_examples)
    cleaner = TextCleaner()
    texts = [cleaner(t) for t in train.column("text").to_pylist()]
    tok = GPT1Tokenizer(train_bpe(texts, s.vocab_size, min_frequency=2))
    family = family_of(task)
    train_ids, dev_ids = (encode_examples(task, split, tok, cleaner, s.n_ctx).examples
                          for split in (train, dev))
    return Data(train_ids, family.targets(task, train), dev_ids, family.targets(task, dev), tok)


def _random_batches(lengths: np.ndarray, batch_size: int,
                    rng: np.random.Generator) -> list[np.ndarray]:
    order = rng.permutation(len(lengths))
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


@contextmanager
def padded_to_max(width: int) -> Iterator[None]:
    """Inside, `gpt1.training.finetune_loop` trains on random batches and pads every batch to
    `width`."""
    def pad_to_width(seqs: list[list[int]], pad_id: int,
                     *rounding: int | None) -> tuple[torch.Tensor, torch.Tensor]:
        ids, lengths = pad_batch(seqs, pad_id)  # `width` replaces any rounding
        return F.pad(ids, (0, width - ids.shape[1]), value=pad_id), lengths

    with mock.patch.object(gpt1.training.finetune_loop, "bucketed_batches", _random_batches), \
            mock.patch.object(gpt1.training.finetune_loop, "pad_batch", pad_to_width):
        yield


def real_share(lengths: np.ndarray, batches: list[np.ndarray], width: int | None) -> float:
    """The share of the padded training tensors' positions that hold real tokens."""
    padded = sum(len(b) * (width or int(lengths[b].max())) for b in batches)
    return float(lengths.sum() / padded)


@dataclass
class Side:
    """One side's measurements, a list entry per repetition."""

    context: Callable[[], AbstractContextManager[None]]
    train_rate: list[float] = field(default_factory=list)
    eval_rate: list[float] = field(default_factory=list)
    accuracy: list[float] = field(default_factory=list)


def main(argv: list[str] | None = None) -> Path:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--train-examples", type=int, default=1000,
                   help="SST-2 training sentences fine-tuned on for one epoch")
    args = p.parse_args(argv)
    params = load_params(ROOT / "params.yaml")
    s = sizes(params, args.tiny, args.train_examples)
    root = SAMPLE if args.tiny else DATA
    if not (root / "glue" / "SST-2" / "train.tsv").is_file():
        raise FileNotFoundError(f"SST-2 not found under {root}: the full benchmark needs "
                                "../shared/data (--tiny runs on the bundled sample)")
    data = load_data(params, root, s)
    task = params.tasks[TASK]
    cfg: FinetuneTrainParams = params.finetune.for_task(task, params.finetune.seeds[0])
    cfg = cfg.model_copy(update={"epochs": 1})
    torch.manual_seed(cfg.seed)
    trunk = GPT1(GPT1Config(vocab_size=data.tok.vocab_size, n_ctx=s.n_ctx, n_embd=s.n_embd,
                            n_layer=s.n_layer, n_head=s.n_head, embd_pdrop=params.model.dropout,
                            attn_pdrop=params.model.dropout, resid_pdrop=params.model.dropout))
    initial = task_model(trunk, task, cfg)
    lengths = example_lengths(data.train)
    width = int(max(lengths.max(), example_lengths(data.dev).max()))

    sides = {"ours": Side(nullcontext), "baseline": Side(lambda: padded_to_max(width))}

    def run(side: Side) -> Callable[[], float]:
        def once() -> float:
            model = copy.deepcopy(initial)
            with side.context():
                result = finetune(model, data.train, data.train_targets, data.tok.pad_id, cfg)
                started = time.perf_counter()
                outputs = predict(model, data.dev, data.tok.pad_id, cfg.batch_size)
                side.eval_rate.append(len(data.dev) / (time.perf_counter() - started))
            side.accuracy.append(score(["accuracy"], data.dev_targets,
                                       outputs.argmax(axis=1))["accuracy"])
            side.train_rate.append(len(data.train) / result.seconds)
            return side.train_rate[-1]
        return once

    alternate({name: run(side) for name, side in sides.items()}, args.repeats)
    ours, base = sides["ours"], sides["baseline"]
    # the same weights scored both ways: padding must change no prediction
    model = copy.deepcopy(initial)
    sorted_outputs = predict(model, data.dev, data.tok.pad_id, cfg.batch_size)
    with padded_to_max(width):
        padded_outputs = predict(model, data.dev, data.tok.pad_id, cfg.batch_size)
    gap = float(np.abs(sorted_outputs - padded_outputs).max())
    if not np.array_equal(sorted_outputs.argmax(axis=1), padded_outputs.argmax(axis=1)):
        raise AssertionError(f"length-sorted and padded-to-max evaluation disagree (max |Δ| {gap})")

    rates = Table("fine-tuning examples/s (median)",
                  ["phase", "ours", "baseline", "ratio", "target"])
    for phase, a, b in (("train", ours.train_rate, base.train_rate),
                        ("eval", ours.eval_rate, base.eval_rate)):
        rates.add(phase=phase, ours=median(a), baseline=median(b), ratio=median(a) / median(b),
                  target=f">= {TARGET:g}x")
    rng = np.random.default_rng(cfg.seed)  # the epoch's batches, as finetune draws them
    share = {"ours": real_share(lengths, bucketed_batches(lengths, cfg.batch_size, rng), None),
             "baseline": real_share(lengths, _random_batches(lengths, cfg.batch_size, rng),
                                    width)}
    quality = Table("SST-2 dev accuracy after training", ["side", "accuracy", "real_tokens"])
    for name, side in sides.items():
        quality.add(side=name, accuracy=median(side.accuracy), real_tokens=share[name])
    quality.notes = [
        f"{len(data.train):,} SST-2 train examples, 1 epoch, batch {cfg.batch_size}; "
        f"{len(data.dev):,} dev examples; median of {args.repeats} alternating repetitions",
        f"model n_embd {s.n_embd}, n_layer {s.n_layer}, n_head {s.n_head}, n_ctx {s.n_ctx}, "
        f"vocab {data.tok.vocab_size:,} (a BPE learned on the training sentences); the trunk is "
        "randomly initialised, so the accuracy checks that both sides learn alike, not GPT-1's",
        f"one model's dev outputs, length-sorted vs padded to the maximum: same predictions, "
        f"largest difference {gap:.2g}",
        f"baseline: random batches padded to the longest example, {width} tokens; "
        f"real_tokens: share of the training tensors' positions that are real tokens",
    ]
    settings = {"sizes": asdict(s), "repeats": args.repeats, "tiny": args.tiny,
                "epochs": cfg.epochs, "batch_size": cfg.batch_size, "seed": cfg.seed,
                "device": cfg.device, "precision": cfg.precision}
    return publish([rates, quality], args.out, "finetune", settings)


if __name__ == "__main__":
    main()
