"""Pretraining loader throughput (issue target: the loader >= 20x the model's step rate).

Batches/s of `WindowSampler.batch`, the real loader over shards written by the real `ShardWriter`
and memory-mapped by `read_split`, against steps/s of a real training step (forward, backward,
gradient clipping, AdamW) of params.yaml's model at params.yaml's batch size: the loader must
never be what a pretraining step waits for.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from bench.common import Table, alternate, median, parser, publish
from gpt1.config import load_params
from gpt1.corpus.shards import ShardWriter, read_split, token_dtype
from gpt1.corpus.tokenizer import SPECIAL_TOKENS
from gpt1.model.transformer import GPT1, GPT1Config
from gpt1.training.device import autocast, placement
from gpt1.training.optim import build_optimizer
from gpt1.training.pretrain_loop import WindowSampler

ROOT = Path(__file__).resolve().parents[1]
TARGET = 20.0


@dataclass(frozen=True)
class Sizes:
    tokens: int  # random token ids written to the shards
    shard_tokens: int
    loader_batches: int  # timed per repetition
    model_steps: int  # timed per repetition, after one untimed step
    batch_size: int
    n_ctx: int
    n_embd: int
    n_layer: int
    n_head: int
    vocab_size: int


def sizes(tiny: bool) -> Sizes:
    """Tiny smoke sizes, or params.yaml's model, batch size and vocabulary (BPE + specials)."""
    params = load_params(ROOT / "params.yaml")
    if tiny:
        return Sizes(tokens=100_000, shard_tokens=40_000, loader_batches=20, model_steps=1,
                     batch_size=4, n_ctx=32, n_embd=32, n_layer=1, n_head=2, vocab_size=500)
    m = params.model
    return Sizes(tokens=4 << 20, shard_tokens=1 << 20, loader_batches=500, model_steps=3,
                 batch_size=params.pretrain.batch_size, n_ctx=m.n_ctx, n_embd=m.n_embd,
                 n_layer=m.n_layer, n_head=m.n_head,
                 vocab_size=params.bpe.vocab_size + len(SPECIAL_TOKENS))


def write_shards(directory: Path, s: Sizes, seed: int) -> list[np.ndarray]:
    """`s.tokens` random ids in shards of `s.shard_tokens`, read back memory-mapped."""
    writer = ShardWriter(directory, token_dtype(s.vocab_size), s.shard_tokens)
    rng = np.random.default_rng(seed)
    for start in range(0, s.tokens, s.shard_tokens):
        writer.append(rng.integers(0, s.vocab_size, size=min(s.shard_tokens, s.tokens - start)))
    writer.close()
    return read_split(directory)


class Loader:
    """Times `WindowSampler.batch`; each repetition reads batches no earlier one read."""

    def __init__(self, sampler: WindowSampler, s: Sizes) -> None:
        self.sampler, self.s, self.next_index = sampler, s, 0

    def __call__(self) -> float:
        first = self.next_index
        self.next_index += self.s.loader_batches
        started = time.perf_counter()
        for index in range(first, self.next_index):
            self.sampler.batch(index, self.s.batch_size)
        return self.s.loader_batches / (time.perf_counter() - started)


class Steps:
    """Times pretraining steps of the model, on batches read beforehand."""

    def __init__(self, sampler: WindowSampler, s: Sizes, device: torch.device,
                 dtype: torch.dtype) -> None:
        self.device, self.dtype = device, dtype
        self.model = GPT1(GPT1Config(vocab_size=s.vocab_size, n_ctx=s.n_ctx, n_embd=s.n_embd,
                                     n_layer=s.n_layer, n_head=s.n_head)).to(device).train()
        self.optimizer = build_optimizer(self.model, 6e-4, 0.01, device)
        self.batches = [tuple(t.to(device) for t in sampler.batch(i, s.batch_size))
                        for i in range(s.model_steps)]
        self.step(*self.batches[0])  # Adam allocates its state on the first step

    def step(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        with autocast(self.device, self.dtype):
            loss = self.model.lm_loss(x, y)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()
        return loss

    def __call__(self) -> float:
        started = time.perf_counter()
        for x, y in self.batches:
            loss = self.step(x, y)
        loss.item()  # waits for the device, which the loop does every log_every steps
        return len(self.batches) / (time.perf_counter() - started)


def main(argv: list[str] | None = None) -> Path:
    args = parser(__doc__.splitlines()[0]).parse_args(argv)
    s = sizes(args.tiny)
    pretrain = load_params(ROOT / "params.yaml").pretrain
    place = placement(pretrain.device, pretrain.precision)
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory(prefix="bench-loader-") as tmp:
        shards = write_shards(Path(tmp), s, seed=0)
        sampler = WindowSampler(shards, s.n_ctx, seed=0, name="train")
        rates = alternate({"loader": Loader(sampler, s), "step": Steps(sampler, s, place.device,
                                                                  place.dtype)},
                          args.repeats)
    loader, step = median(rates["loader"]), median(rates["step"])
    table = Table("pretraining loader vs training step (median per second)",
                  ["batch_size", "n_ctx", "loader_batches", "model_steps", "ratio", "target"])
    table.add(batch_size=s.batch_size, n_ctx=s.n_ctx, loader_batches=loader, model_steps=step,
              ratio=loader / step, target=f">= {TARGET:g}x")
    table.notes = [
        f"{s.tokens:,} random ids in {-(-s.tokens // s.shard_tokens)} memory-mapped shards; "
        f"{s.loader_batches} loader batches and {s.model_steps} training steps per repetition, "
        f"median of {args.repeats} alternating repetitions",
        f"model n_embd {s.n_embd}, n_layer {s.n_layer}, n_head {s.n_head}, vocab "
        f"{s.vocab_size:,}, {str(place.dtype).removeprefix('torch.')} on {place.device}: forward, "
        "backward, clipping, AdamW",
    ]
    settings = {"sizes": asdict(s), "repeats": args.repeats, "tiny": args.tiny,
                "device": str(place.device), "dtype": str(place.dtype)}
    return publish([table], args.out, "loader", settings)


if __name__ == "__main__":
    main()
