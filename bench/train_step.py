"""Pretraining throughput: our training loop (`gpt1.training.pretrain_loop.pretrain`, under the
default precision policy) against HuggingFace's `OpenAIGPTLMHeadModel` in fp32 and, where the
policy trains in bf16 (CUDA, a CPU with AMX), under bf16 autocast, same architecture, batch and
sequence length, alternating in one run; the ratio is against the fastest transformers run; MFU
against a matmul peak measured in this run.

    python -m bench.train_step                      # params.yaml's model and batch, on the CPU
    python -m bench.train_step --preset paper --device cuda --compile
    python -m bench.train_step --profile            # and where each side's step time goes

Each side first runs once untimed, then the timed repetitions alternate, the side that starts
rotating each round; within every run, `--warmup` steps come before the clock starts.

`--compile` adds the `torch.compile`d runs: ours (`pretrain.compile`) and transformers' model
under the policy's dtype, each beside its eager run, so that transformers is met at its best.

Where the precision policy trains in bf16 (where it is faster: CUDA, AMX), our loop also
trains 200 steps in fp32 and in bf16 autocast from the same initialisation and batches, and the
two loss curves are compared; `--curve-steps N` sets the length (0 skips, and N > 0 forces the
curves where the policy trains in fp32).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.profiler import record_function

from bench.common import Table, alternate, median, parser, publish
from bench.profiling import breakdown, breakdown_table, step_profiler, top_ops
from gpt1.config import ModelParams, PretrainParams, load_params
from gpt1.interop.hf import to_hf_config
from gpt1.model.flops import measure_peak_flops
from gpt1.model.transformer import GPT1, GPT1Config
from gpt1.presets.edit import load_preset
from gpt1.training.device import autocast, placement, resolve_device
from gpt1.training.pretrain_loop import WindowSampler, pretrain

REPO = Path(__file__).resolve().parents[1]
CURVE_STEPS = 200
PEAK_SECONDS = 3.0  # of repeated large matmuls, the fastest of which is the peak
TINY_MODEL = {"n_ctx": 32, "n_embd": 64, "n_layer": 2, "n_head": 2, "dropout": 0.1}


@dataclass(frozen=True)
class Setup:
    model: GPT1Config
    train: PretrainParams
    shards: list[np.ndarray]
    warmup: int  # steps run before timing: allocations, kernel choice, torch.compile
    steps: int  # steps timed per repetition
    compiled: bool = False  # also time the torch.compile'd runs of both sides

    @property
    def tokens_per_step(self) -> int:
        return self.train.batch_size * self.model.n_ctx


def make_setup(preset: str | None, device: str, precision: str, tiny: bool,
               steps: int, warmup: int, compiled: bool = False) -> Setup:
    """params.yaml's model and pretraining knobs (or a preset's over them) on random tokens;
    `compiled` adds the compiled runs, and at least 2 warm-up steps, the first of which
    compiles."""
    if compiled:
        warmup = max(warmup, 2)
    params = load_params(REPO / "params.yaml")
    overlay = load_preset(preset) if preset else {}
    model = ModelParams(**{**params.model.model_dump(), **overlay.get("model", {}),
                           **(TINY_MODEL if tiny else {})})
    vocab = 256 if tiny else overlay.get("bpe", {}).get("vocab_size", params.bpe.vocab_size)
    knobs = {**params.pretrain.model_dump(), **overlay.get("pretrain", {}),
             # one step more than timed: the loop evaluates after its last step
             "device": device, "precision": precision, "max_steps": warmup + steps + 1,
             "compile": False,  # the eager run's; `sides` sets it for the compiled one
             # off the CPU the loop reads its losses (waiting for the device) every log_every
             # steps: at the warm-up's last step and the last timed one among them (`StepClock`)
             "eval_every": 10**9, "log_every": math.gcd(warmup, steps), "peak_tflops": 1.0}
    # the few timed steps sit inside the warmup: the rate changes no step's cost
    knobs["warmup_steps"] = min(knobs["warmup_steps"], knobs["max_steps"])
    if tiny:
        knobs["batch_size"] = 4
    cfg = GPT1Config(vocab_size=vocab, n_ctx=model.n_ctx, n_embd=model.n_embd,
                     n_layer=model.n_layer, n_head=model.n_head, embd_pdrop=model.dropout,
                     attn_pdrop=model.dropout, resid_pdrop=model.dropout)
    rng = np.random.default_rng(0)
    shards = [rng.integers(0, vocab, size=max(100_000, 4 * model.n_ctx), dtype=np.int32)]
    return Setup(cfg, PretrainParams(**knobs), shards, warmup, steps, compiled)


class StepClock:
    """Seconds from the end of step `warmup` to the end of step `warmup + steps`, read in the
    metrics callbacks of those steps, which the loop calls once it has read their losses (which
    waits for the device: `make_setup` has it read at both); with a `profiler`, it records
    those steps."""

    def __init__(self, warmup: int, steps: int, profiler: Any = None) -> None:
        self.warmup, self.last, self.profiler = warmup, warmup + steps, profiler
        self.started, self.finished = math.nan, math.nan
        self.losses: list[float] = []

    def __call__(self, step: int, values: dict[str, float]) -> None:
        now = time.perf_counter()
        if "train/loss" in values:
            self.losses.append(values["train/loss"])
        if step == self.warmup:
            if self.profiler is not None:
                self.profiler.start()
            self.started = time.perf_counter()
        if step == self.last:
            self.finished = now
            if self.profiler is not None:
                self.profiler.stop()

    @property
    def seconds(self) -> float:
        return self.finished - self.started


def ours(setup: Setup, train: PretrainParams | None = None,
         clock: StepClock | None = None) -> StepClock:
    """One run of the real pretraining loop; the clock covers the steps after the warm-up."""
    train = train or setup.train
    torch.manual_seed(train.seed)
    model = GPT1(setup.model)
    clock = clock or StepClock(setup.warmup, setup.steps)
    pretrain(model, setup.shards, setup.shards, train, on_metrics=clock)
    return clock


def reference(setup: Setup, dtype: torch.dtype, clock: StepClock | None = None,
              compiled: bool = False) -> StepClock:
    """`OpenAIGPTLMHeadModel` with AdamW, gradient clipping and the same batches, its forward
    (through `torch.compile` if `compiled`) under autocast to `dtype` below fp32: the loop one
    would write around transformers."""
    from transformers import OpenAIGPTConfig, OpenAIGPTLMHeadModel

    train = setup.train
    device = resolve_device(train.device)
    torch.manual_seed(train.seed)
    model = OpenAIGPTLMHeadModel(OpenAIGPTConfig(**to_hf_config(setup.model))).to(device).train()
    # the loss it falls back to, named: its warning about an unnamed one breaks the compiled graph
    model.loss_type = "ForCausalLM"
    forward = torch.compile(model) if compiled else model
    optimizer = torch.optim.AdamW(model.parameters(), lr=train.lr,
                                  weight_decay=train.weight_decay)
    sampler = WindowSampler(setup.shards, setup.model.n_ctx, train.seed, "train")
    clock = clock or StepClock(setup.warmup, setup.steps)
    for step in range(setup.warmup + setup.steps):
        with record_function("data"):
            x, _ = sampler.batch(step, train.batch_size)
            x = x.to(device)
        with autocast(device, dtype):
            loss = forward(input_ids=x, labels=x).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        with record_function("optimizer"):
            torch.nn.utils.clip_grad_norm_(model.parameters(), train.grad_clip)
            optimizer.step()
        clock(step + 1, {"train/loss": loss.item()})
    return clock


@dataclass(frozen=True)
class Side:
    """One run the benchmark times: a fresh model each call, computing in `dtype`."""

    run: Callable[[StepClock | None], StepClock]
    dtype: torch.dtype
    reference: bool  # transformers': the ratio is against the fastest of these


def sides(setup: Setup, dtype: torch.dtype) -> dict[str, Side]:
    """Ours, and transformers in fp32 and, where the policy picked bf16 (CUDA, AMX; or
    `--precision bf16`), under bf16 autocast too: the reference at each setting a user would
    choose; with `setup.compiled`, ours and transformers under `dtype` through `torch.compile`
    too."""
    name = str(dtype).removeprefix("torch.")
    runs = {"ours": Side(lambda clock: ours(setup, clock=clock), dtype, reference=False)}
    if setup.compiled:
        train = setup.train.model_copy(update={"compile": True})
        runs["ours compiled"] = Side(lambda clock: ours(setup, train, clock), dtype,
                                     reference=False)
    runs["transformers float32"] = Side(lambda clock: reference(setup, torch.float32, clock),
                                        torch.float32, reference=True)
    if dtype != torch.float32:
        runs[f"transformers {name}"] = Side(lambda clock: reference(setup, dtype, clock), dtype,
                                            reference=True)
    if setup.compiled:
        runs[f"transformers {name} compiled"] = Side(
            lambda clock: reference(setup, dtype, clock, compiled=True), dtype, reference=True)
    return runs


def profile_table(setup: Setup, runs: dict[str, Side], device: torch.device
                  ) -> tuple[Table, dict[str, dict[str, float]], dict[str, str]]:
    """One profiled run of each side: milliseconds per step in each category, and its share;
    and each side's costliest ops and kernels, as torch.profiler prints them."""
    steps: dict[str, dict[str, float]] = {}
    ops: dict[str, str] = {}
    for name, side in runs.items():
        profiler = step_profiler(device)
        clock = side.run(StepClock(setup.warmup, setup.steps, profiler))
        steps[name] = breakdown(profiler.events(), clock.seconds, setup.steps, device)
        ops[name] = top_ops(profiler, device)
    table = breakdown_table("profile: milliseconds per step", steps)
    table.notes.append(f"one run of each under torch.profiler, {setup.steps} steps after "
                       f"{setup.warmup} warm-up steps (the profiler slows small ops: the timings "
                       "above are measured without it)")
    return table, steps, ops


def loss_curves(setup: Setup, steps: int) -> dict[str, list[float]]:
    """Our loop's per-step training loss in fp32 and in bf16 autocast, same init and batches."""
    curves = {}
    for precision in ("fp32", "bf16"):
        train = setup.train.model_copy(update={"precision": precision, "max_steps": steps})
        curves[precision] = ours(Setup(setup.model, train, setup.shards, 0, steps), train).losses
    return curves


def curve_gap(curves: dict[str, list[float]], window: int) -> float:
    """Relative gap of the mean loss over the last `window` steps, bf16 against fp32."""
    fp32, bf16 = (float(np.mean(curves[p][-window:])) for p in ("fp32", "bf16"))
    return abs(bf16 - fp32) / fp32


def run(setup: Setup, repeats: int, curve_steps: int | None, profile: bool = False,
        on_timed: Callable[[list[Table], dict], object] | None = None
        ) -> tuple[list[Table], dict]:
    """The timing table (`on_timed` sees it and its figures before anything else runs), then,
    as asked, the profile and the bf16 loss curves."""
    place = placement(setup.train.device, setup.train.precision)
    device, dtype = place.device, place.dtype
    flops = setup.model.training_flops_per_token()
    runs = sides(setup, dtype)
    peaks = [measure_peak_flops(device, dtype, PEAK_SECONDS)]
    # every run warms up (`setup.warmup` steps) before its clock starts; the first run of each
    # side also pays the process's first calls (CUDA's lazily loaded modules, a compilation
    # inductor caches for the next), so one untimed run of each comes first
    tok_s = alternate({name: lambda side=side: setup.steps * setup.tokens_per_step
                       / side.run(None).seconds for name, side in runs.items()}, repeats,
                      warmup=True)
    # the fastest matmul of before and after: a peak caught in a slow moment would flatter MFU
    peak = {dtype: max(*peaks, measure_peak_flops(device, dtype, PEAK_SECONDS))}
    if dtype != torch.float32:
        peak[torch.float32] = measure_peak_flops(device, torch.float32, PEAK_SECONDS)
    medians = {name: median(values) for name, values in tok_s.items()}
    fastest_reference = max(medians[name] for name, side in runs.items() if side.reference)
    table = Table("train_step", ["model", "dtype", "tokens/s", "ratio", "MFU %", "peak GFLOP/s"])
    for name, value in medians.items():
        side_dtype = runs[name].dtype
        table.add(model=name, dtype=str(side_dtype).removeprefix("torch."), **{
            "tokens/s": value, "ratio": value / fastest_reference,
            "MFU %": 100 * value * flops / peak[side_dtype],
            "peak GFLOP/s": peak[side_dtype] / 1e9})
    table.notes += [
        f"median of {repeats} alternating repetitions (after an untimed one of each side; "
        f"the side that starts a round rotates) of {setup.steps} steps after "
        f"{setup.warmup} warm-up steps; batch {setup.train.batch_size} x {setup.model.n_ctx} "
        f"tokens, {setup.model.n_layer} layers x {setup.model.n_embd}, vocab "
        f"{setup.model.vocab_size}, on {device}",
        "MFU: tokens/s x training FLOPs per token over the peak of a large matmul in the same "
        "dtype, measured in this run (a datasheet peak is higher)",
        "ratio: against the fastest transformers run (OpenAIGPTLMHeadModel; under bf16 autocast "
        "too where ours trains in bf16; with --compile, through torch.compile too)",
        "targets: ratio >= 2.0 where the policy trains in bf16 (CUDA, AMX); elsewhere (fp32), "
        "MFU >= 70%"]
    result: dict[str, Any] = {"tokens_per_second": tok_s, "flops_per_token": flops,
                              "peak_flops": peak[dtype]}
    tables = [table]
    if on_timed is not None:
        on_timed(tables, result)
    if profile:
        profiled, result["profile_ms_per_step"], result["profile_top_ops"] = profile_table(
            setup, runs, device)
        tables.append(profiled)
    if curve_steps is None:
        curve_steps = CURVE_STEPS if dtype == torch.bfloat16 else 0
        if not curve_steps:
            table.notes.append("no bf16 loss curve: the policy trains in fp32 here (bf16 is faster "
                               "only on CUDA and AMX; --curve-steps N forces one)")
    if curve_steps:
        curves = loss_curves(setup, curve_steps)
        window = max(1, curve_steps // 10)
        gap = curve_gap(curves, window)
        curve = Table("loss curve: bf16 autocast vs fp32", ["step", "fp32 loss", "bf16 loss"])
        marks = sorted({1, *range(max(1, curve_steps // 8), curve_steps + 1,
                                  max(1, curve_steps // 8))})
        for step in marks:
            curve.add(step=step, **{"fp32 loss": curves["fp32"][step - 1],
                                    "bf16 loss": curves["bf16"][step - 1]})
        curve.notes.append(f"mean loss of the last {window} steps differs by {100 * gap:.2f}% "
                           f"(target: within 1%)")
        tables.append(curve)
        result |= {"curves": curves, "curve_gap": gap}
    return tables, result


def main(argv: list[str] | None = None) -> Path:
    p = parser(__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cpu", help="cpu | cuda | cuda:N")
    p.add_argument("--precision", default="auto", help="auto (the default policy) | fp32 | bf16")
    p.add_argument("--preset", default=None, help="a gpt1 preset's model and batch (e.g. paper)")
    p.add_argument("--compile", action="store_true",
                   help="also time ours (pretrain.compile) and transformers through "
                        "torch.compile; the warm-up, at least 2 steps, absorbs compilation")
    p.add_argument("--steps", type=int, default=10, help="timed steps per repetition")
    p.add_argument("--warmup", type=int, default=5,
                   help="untimed steps before them (with --steps, a multiple of a larger "
                        "number lets the loop read its losses less often off the CPU)")
    p.add_argument("--profile", action="store_true",
                   help="also profile a run of each side: where a step's time goes")
    p.add_argument("--curve-steps", type=int, default=None,
                   help=f"steps of the fp32 vs bf16 loss curves (default: {CURVE_STEPS} where "
                        "the policy picks bf16, else none; 0: none)")
    args = p.parse_args(argv)
    setup = make_setup(args.preset, args.device, args.precision, args.tiny, args.steps,
                       args.warmup, args.compile)
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    settings["warmup"] = setup.warmup
    tables, result = run(setup, args.repeats, args.curve_steps, args.profile,
                         on_timed=lambda tables, result: publish(
                             tables, args.out, "train_step", {**settings, **result}))
    return publish(tables, args.out, "train_step", {**settings, **result})


if __name__ == "__main__":
    main()
