"""Generation throughput: `gpt1.model.generate.sample`, greedy, which keeps past keys and values
in a KV cache, against transformers' `OpenAIGPTLMHeadModel.generate` (openai-gpt has no cache:
every step recomputes the whole sequence) on the same random weights in fp32, new tokens per
second after a prompt, alternating in one run. Checked first: our cached logits at every step
agree with transformers' within a tolerance relative to their scale, and greedy ids agree
wherever the reference's top two logits are further apart than rounding could move them.

    python -m bench.generate                    # params.yaml's model, 256 tokens after 64, CPU
    python -m bench.generate --preset paper --device cuda
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import OpenAIGPTConfig, OpenAIGPTLMHeadModel

from bench.common import Table, alternate, median, parser, publish
from gpt1.config import ModelParams, load_params
from gpt1.interop.hf import to_hf_config, to_hf_state_dict
from gpt1.model.generate import sample, token_logits
from gpt1.model.transformer import GPT1, GPT1Config
from gpt1.presets.edit import load_preset
from gpt1.training.device import resolve_device

REPO = Path(__file__).resolve().parents[1]
PROMPT_TOKENS, NEW_TOKENS = 64, 256
TINY_MODEL = {"n_ctx": 32, "n_embd": 64, "n_layer": 2, "n_head": 2}
TINY_PROMPT_TOKENS, TINY_NEW_TOKENS, TINY_VOCAB = 8, 24, 256
# Random weights N(0, 0.2): at GPT-1's 0.02 greedy decoding repeats one token (1 distinct id of
# 256 on params.yaml's model, 21 at 0.2), and agreeing on it says little; at 1.0 a 12-layer
# model is so ill-conditioned that rounding alone moves logits by ~11 and decides the argmax.
# The width changes no step's cost.
INIT_STD = 0.2
# |Δlogit| allowed at a step, relative to its largest |logit|. In fp32 at INIT_STD the two sides
# part by 3e-5 on logits up to 10 on the CPU (params.yaml's model) and by 4e-4 on an H200 (12
# layers). TF32 matmuls (on wherever a training run configured CUDA) part them by more, so the
# check runs in full fp32 (bench/results/findings.md, "Generation check: ... not TF32").
RTOL = 1e-3


def make_config(preset: str | None, tiny: bool, length: int) -> GPT1Config:
    """params.yaml's model (or a preset's over it), its n_ctx raised to `length` where shorter:
    transformers' generate cannot slide the window past n_ctx as `sample` does."""
    params = load_params(REPO / "params.yaml")
    overlay = load_preset(preset) if preset else {}
    model = ModelParams(**{**params.model.model_dump(), **overlay.get("model", {}),
                           **(TINY_MODEL if tiny else {})})
    vocab = TINY_VOCAB if tiny else overlay.get("bpe", {}).get("vocab_size",
                                                               params.bpe.vocab_size)
    return GPT1Config(vocab_size=vocab, n_ctx=max(model.n_ctx, length), n_embd=model.n_embd,
                      n_layer=model.n_layer, n_head=model.n_head, initializer_range=INIT_STD)


def transformers_model(model: GPT1) -> OpenAIGPTLMHeadModel:
    """`OpenAIGPTLMHeadModel` with `model`'s weights (its LM head tied to them), in eval mode."""
    hf = OpenAIGPTLMHeadModel(OpenAIGPTConfig(**to_hf_config(model.config)))
    missing, unexpected = hf.load_state_dict(to_hf_state_dict(model), strict=False)
    if missing != ["lm_head.weight"] or unexpected:
        raise ValueError(f"weights left out {missing}, not placed {unexpected}")
    return hf.to(next(model.parameters()).device).eval()


@torch.no_grad()
def cached_logits(model: GPT1, prompt: list[int], ids: list[int]) -> torch.Tensor:
    """Our fp32 logits (len(ids), V) of each of `ids` given the tokens before it, computed by
    what `sample` computes them with (`token_logits`): the prompt into a static KV cache, then
    one token a decode step (compiled on CUDA, as in `sample`)."""
    tokens = torch.tensor(prompt + ids, device=next(model.parameters()).device)
    # each copied before the next step, which on CUDA overwrites the graph's output
    return torch.stack([logits.clone() for logits in token_logits(model, tokens, len(prompt))])


@torch.no_grad()
def reference_logits(hf: OpenAIGPTLMHeadModel, prompt: list[int],
                     ids: list[int]) -> torch.Tensor:
    """transformers' fp32 logits (len(ids), V) of each of `ids` given the tokens before it: one
    forward of the whole sequence, which is what each step of its `generate` recomputes."""
    logits = hf(torch.tensor([prompt + ids], device=hf.device)).logits
    return logits[0, len(prompt) - 1:-1].float()


@contextmanager
def full_fp32() -> Iterator[None]:
    """fp32 matmuls and convolutions in full precision inside, not TF32 (which
    `gpt1.training.device.configure_backends` turns on for CUDA): the logits check compares two
    implementations, and TF32's 10-bit mantissas would decide it."""
    matmul, cudnn = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = matmul, cudnn


def tolerances(reference: torch.Tensor) -> torch.Tensor:
    """Each step's tolerance (steps,) on |Δlogit|: RTOL of its largest |reference logit|."""
    return RTOL * reference.abs().amax(dim=-1)


def near_ties(reference: torch.Tensor) -> list[bool]:
    """The steps whose top two reference logits are at most twice the tolerance apart: logits
    each within the tolerance of the reference may rank those two either way."""
    top2 = reference.topk(2, dim=-1).values
    return ((top2[:, 0] - top2[:, 1]) <= 2 * tolerances(reference)).tolist()


def check_logits(ours: torch.Tensor, reference: torch.Tensor) -> float:
    """The largest |Δlogit| of `ours` (steps, V) against `reference`; fails at the first step
    beyond its tolerance."""
    deltas, limits = (ours - reference).abs().amax(dim=-1), tolerances(reference)
    over = (deltas > limits).nonzero()
    if len(over):
        step = int(over[0])
        raise AssertionError(
            f"logits differ at step {step}: max |Δlogit| {float(deltas[step]):.3g} > tolerance "
            f"{float(limits[step]):.3g} ({RTOL:g} x max |reference logit|)")
    return float(deltas.max())


def check_greedy(ids: list[int], reference: torch.Tensor, ties: Sequence[bool]) -> None:
    """`ids` are the reference's argmax at every step that is not a near tie."""
    argmax = reference.argmax(dim=-1).tolist()
    for step, (token, expected, tie) in enumerate(zip(ids, argmax, ties, strict=True)):
        if token != expected and not tie:
            raise AssertionError(f"greedy ids differ at step {step}, not a near tie: {token} "
                                 f"against the reference's argmax {expected}")


def agreed_steps(ids: list[int], expected: list[int], ties: Sequence[bool]) -> int:
    """How many leading steps `ids` keeps to `expected`; the two may part only at a near tie
    (after it, `ids` continue another text, which `expected`'s near ties say nothing of)."""
    steps = next((step for step, (a, b) in enumerate(zip(ids, expected, strict=True)) if a != b),
                 len(expected))
    if steps < len(expected) and not ties[steps]:
        raise AssertionError(f"greedy ids differ at step {steps}, not a near tie: "
                             f"{ids[steps]} against {expected[steps]}")
    return steps


@dataclass(frozen=True)
class Agreement:
    """Our greedy ids, checked against transformers' logits of the same sequence."""

    ids: list[int]
    near_ties: list[bool]
    max_delta: float  # the largest |Δlogit| of any step
    max_logit: float  # the largest |reference logit|, the scale RTOL is taken of


def verify(model: GPT1, hf: OpenAIGPTLMHeadModel, prompt: list[int],
           new_tokens: int) -> Agreement:
    """`sample`'s greedy ids and our cached logits, checked against `hf`'s logits of the prompt
    and those ids; fails naming the step where they part."""
    ids = sample(model, prompt, new_tokens, temperature=0.0)
    reference = reference_logits(hf, prompt, ids)
    max_delta = check_logits(cached_logits(model, prompt, ids), reference)
    ties = near_ties(reference)
    check_greedy(ids, reference, ties)
    return Agreement(ids, ties, max_delta, float(reference.abs().max()))


def timed(generate: Callable[[], list[int]], check: Callable[[list[int]], object]) -> float:
    """New tokens per second of one `generate()`, whose ids must pass `check`."""
    started = time.perf_counter()
    ids = generate()
    seconds = time.perf_counter() - started
    check(ids)
    return len(ids) / seconds


def run(cfg: GPT1Config, prompt_tokens: int, new_tokens: int, device: torch.device,
        repeats: int) -> tuple[Table, dict]:
    torch.manual_seed(0)
    model = GPT1(cfg).to(device).eval()
    hf = transformers_model(model)
    prompt = torch.randint(0, cfg.vocab_size, (prompt_tokens,),
                           generator=torch.Generator().manual_seed(0)).tolist()

    def ours() -> list[int]:
        return sample(model, prompt, new_tokens, temperature=0.0)

    @torch.no_grad()
    def theirs() -> list[int]:
        out = hf.generate(torch.tensor([prompt], device=device), max_new_tokens=new_tokens,
                          min_new_tokens=new_tokens, do_sample=False, pad_token_id=0)
        return out[0, prompt_tokens:].tolist()

    with full_fp32():
        agreement = verify(model, hf, prompt, new_tokens)  # also our warm-up; then theirs

    def check(ids: list[int]) -> int:
        return agreed_steps(ids, agreement.ids, agreement.near_ties)

    hf_agreed = check(theirs())
    # warmed up again outside full_fp32: on CUDA, TF32 on or off is a new compile of our step
    tok_s = alternate({"ours": lambda: timed(ours, check),
                       "transformers": lambda: timed(theirs, check)}, repeats, warmup=True)
    ours_med, hf_med = median(tok_s["ours"]), median(tok_s["transformers"])
    table = Table("generate", ["model", "dtype", "new tokens/s", "ratio"])
    table.add(model="ours: sample, KV cache", dtype="float32",
              **{"new tokens/s": ours_med, "ratio": ours_med / hf_med})
    table.add(model="transformers OpenAIGPTLMHeadModel.generate", dtype="float32",
              **{"new tokens/s": hf_med, "ratio": 1.0})
    ties = sum(agreement.near_ties)
    hf_line = (f"transformers' generate gave our ids at all {new_tokens} steps"
               if hf_agreed == new_tokens else
               f"transformers' generate gave our ids for {hf_agreed} steps, then parted from them "
               "at a near tie")
    table.notes += [
        f"median of {repeats} alternating repetitions after a warm-up; {new_tokens} greedy "
        f"tokens after a {prompt_tokens}-token random prompt, batch 1, {cfg.n_layer} layers x "
        f"{cfg.n_embd}, vocab {cfg.vocab_size}, n_ctx {cfg.n_ctx}, random weights "
        f"N(0, {cfg.initializer_range:g}) (well conditioned, and greedy text that varies), "
        f"on {device}",
        f"checked in full fp32 (no TF32): our cached logits within {RTOL:g} x max |logit| of "
        f"transformers' on prompt + "
        f"our ids at every step (max |Δlogit| {agreement.max_delta:.2g}, logits up to "
        f"{agreement.max_logit:.3g}); our greedy ids are its argmax at every step but near ties "
        f"(top-2 gap <= 2x the tolerance: {ties} of {new_tokens} steps); {hf_line} (checked on "
        f"every repetition of both sides); {len(set(agreement.ids))} distinct ids",
        "target: ratio >= 5x"]
    return table, {"tokens_per_second": tok_s, "init_std": cfg.initializer_range,
                   "rtol": RTOL, "max_abs_delta_logit": agreement.max_delta,
                   "max_abs_logit": agreement.max_logit, "near_tie_steps": ties,
                   "transformers_agreed_steps": hf_agreed,
                   "distinct_ids": len(set(agreement.ids)), "n_ctx": cfg.n_ctx}


def main(argv: list[str] | None = None) -> Path:
    p = parser(__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cpu", help="cpu | cuda | cuda:N")
    p.add_argument("--preset", default=None, help="a gpt1 preset's model (e.g. paper)")
    args = p.parse_args(argv)
    prompt_tokens, new_tokens = ((TINY_PROMPT_TOKENS, TINY_NEW_TOKENS) if args.tiny
                                 else (PROMPT_TOKENS, NEW_TOKENS))
    cfg = make_config(args.preset, args.tiny, prompt_tokens + new_tokens)
    table, result = run(cfg, prompt_tokens, new_tokens, resolve_device(args.device),
                        args.repeats)
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    return publish([table], args.out, "generate", {**settings, **result})


if __name__ == "__main__":
    main()
