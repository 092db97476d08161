"""Candidate changes to the compiled pretraining step, each timed beside the step as it is, in one
run on one GPU: the levers issue 28 names for MFU on CUDA, measured before any becomes the
default. Each variant also trains the same batches from the same weights, and its losses are
compared with the step as it is (a faster step must compute the same function).

    python -m bench.step_variants --preset paper --device cuda

Variants:
- plain loss: the LM head and cross-entropy from the whole logits
  (`gpt1.model.lm_loss.whole_logits_cross_entropy`), left to torch.compile to fuse, instead of
  its chunks (written so that a CPU never holds the whole logits);
- large loss chunks: the LM head and cross-entropy 8,192 rows at a time instead of 1,024 (chosen
  on a CPU): 4 passes over the fp32 gradient of the tied head's weight per step instead of 32,
  with matmuls 8x larger, for 1.3 GB of fp32 logits a chunk at the paper's vocabulary;
- CUDA graphs: `torch.compile(mode="reduce-overhead")`, the step's kernels replayed as one graph;
- both;
- cuDNN attention: `scaled_dot_product_attention` preferring cuDNN's kernels over flash
  attention (`sdpa_kernel(..., set_priority=True)`; transformers measured them faster on Hopper,
  huggingface/transformers#48163), where they serve the step's shapes and dropout, else the
  next backend as before.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any
from unittest import mock

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from bench import train_step
from bench.common import Table, alternate, median, parser, publish
from gpt1.model.flops import measure_peak_flops
from gpt1.model.lm_loss import linear_cross_entropy, whole_logits_cross_entropy
from gpt1.training.device import placement

PEAK_SECONDS = 3.0


@dataclass(frozen=True)
class Variant:
    plain_loss: bool = False
    loss_chunk_rows: int | None = None  # None: `linear_cross_entropy`'s default
    compile_mode: str | None = None  # torch.compile's mode; None: its default
    cudnn_attention: bool = False  # cuDNN's attention kernels first where they serve


VARIANTS = {"as is": Variant(), "plain loss": Variant(plain_loss=True),
            "large loss chunks": Variant(loss_chunk_rows=8192),
            "CUDA graphs": Variant(compile_mode="reduce-overhead"),
            "plain loss + CUDA graphs": Variant(plain_loss=True, compile_mode="reduce-overhead"),
            "cuDNN attention": Variant(cudnn_attention=True)}

# every backend, in the order the cuDNN attention variant prefers them
CUDNN_FIRST = [SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION,
               SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


@contextlib.contextmanager
def applied(variant: Variant) -> Iterator[None]:
    """Inside, the pretraining loop runs with `variant`'s changes; dynamo forgets what it
    compiled before and after, so that no variant runs another's compiled code."""
    with contextlib.ExitStack() as stack:
        torch._dynamo.reset()
        stack.callback(torch._dynamo.reset)
        if variant.plain_loss:
            stack.enter_context(mock.patch("gpt1.model.trunk.linear_cross_entropy",
                                           whole_logits_cross_entropy))
        if variant.loss_chunk_rows is not None:
            stack.enter_context(mock.patch(
                "gpt1.model.trunk.linear_cross_entropy",
                partial(linear_cross_entropy, chunk_rows=variant.loss_chunk_rows)))
        if variant.compile_mode is not None:
            stack.enter_context(mock.patch.object(
                torch, "compile", partial(torch.compile, mode=variant.compile_mode)))
        if variant.cudnn_attention:
            stack.enter_context(sdpa_kernel(CUDNN_FIRST, set_priority=True))
        yield


def run_variant(setup: train_step.Setup, variant: Variant) -> train_step.StepClock:
    """One run of the real loop under `variant`: the clock of its timed steps and its losses."""
    with applied(variant):
        return train_step.ours(setup)


def run(setup: train_step.Setup, repeats: int,
        variants: dict[str, Variant]) -> tuple[Table, dict[str, Any]]:
    place = placement(setup.train.device, setup.train.precision)
    flops = setup.model.training_flops_per_token()
    losses: dict[str, list[float]] = {}

    def timed(name: str) -> float:
        clock = run_variant(setup, variants[name])
        losses[name] = clock.losses
        return setup.steps * setup.tokens_per_step / clock.seconds

    tok_s = alternate({name: partial(timed, name) for name in variants}, repeats)
    peak = measure_peak_flops(place.device, place.dtype, PEAK_SECONDS)
    baseline = next(iter(variants))
    table = Table("step variants", ["variant", "tokens/s", "ratio", "MFU %", "max loss gap %"])
    for name in variants:
        gap = max(abs(a - b) / b for a, b in zip(losses[name], losses[baseline], strict=True))
        table.add(variant=name, **{"tokens/s": median(tok_s[name]),
                                   "ratio": median(tok_s[name]) / median(tok_s[baseline]),
                                   "MFU %": 100 * median(tok_s[name]) * flops / peak,
                                   "max loss gap %": 100 * gap})
    table.notes += [
        f"ours compiled (pretrain.compile) under each variant, median of {repeats} alternating "
        f"repetitions of {setup.steps} steps after {setup.warmup} warm-up steps; batch "
        f"{setup.train.batch_size} x {setup.model.n_ctx}, {setup.model.n_layer} layers x "
        f"{setup.model.n_embd}, vocab {setup.model.vocab_size}, on {place.device} in "
        f"{str(place.dtype).removeprefix('torch.')}",
        f"ratio: against '{baseline}'; max loss gap: the largest relative difference of a "
        "step's training loss from its, same weights and batches (dropout draws may differ "
        "between compiled graphs)",
        "MFU: against the peak of a large matmul measured in this run"]
    return table, {"tokens_per_second": tok_s, "losses": losses, "peak_flops": peak}


def main(argv: list[str] | None = None) -> Path:
    p = parser(__doc__.split("\n\n")[0])
    p.set_defaults(repeats=2)
    p.add_argument("--device", default="cuda", help="cuda | cuda:N (cpu: slow to compile)")
    p.add_argument("--preset", default=None, help="a gpt1 preset's model and batch (e.g. paper)")
    p.add_argument("--steps", type=int, default=10, help="timed steps per repetition")
    p.add_argument("--warmup", type=int, default=5,
                   help="untimed steps first (compiling; CUDA graphs record on later calls)")
    p.add_argument("--variants", default=",".join(VARIANTS),
                   help=f"comma-separated, the first the baseline (default: {','.join(VARIANTS)})")
    args = p.parse_args(argv)
    names = args.variants.split(",")
    if unknown := sorted(set(names) - set(VARIANTS)):
        p.error(f"--variants: unknown {unknown}; the variants are {','.join(VARIANTS)}")
    setup = train_step.make_setup(args.preset, args.device, "auto", args.tiny, args.steps,
                                  args.warmup, compiled=True)
    setup = train_step.Setup(setup.model, setup.train.model_copy(update={"compile": True}),
                             setup.shards, setup.warmup, setup.steps, compiled=True)
    table, result = run(setup, args.repeats, {name: VARIANTS[name] for name in names})
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    return publish([table], args.out, "step_variants", {**settings, **result})


if __name__ == "__main__":
    main()
