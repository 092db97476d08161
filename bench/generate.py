"""Generation throughput: `gpt1.model.generate.sample`, greedy, which keeps past keys and values
in a KV cache, against transformers' `OpenAIGPTLMHeadModel.generate` (openai-gpt has no cache:
every step recomputes the whole sequence) on the same random weights in fp32, new tokens per
second after a prompt, alternating in one run. The greedy ids of the two must be identical.

    python -m bench.generate                    # params.yaml's model, 256 tokens after 64, CPU
    python -m bench.generate --preset paper --device cuda
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import torch
from transformers import OpenAIGPTConfig, OpenAIGPTLMHeadModel

from bench.common import Table, alternate, median, parser, publish
from gpt1.config import ModelParams, load_params
from gpt1.interop.hf import to_hf_config, to_hf_state_dict
from gpt1.model.generate import sample
from gpt1.model.transformer import GPT1, GPT1Config
from gpt1.presets.edit import load_preset
from gpt1.training.device import resolve_device

REPO = Path(__file__).resolve().parents[1]
PROMPT_TOKENS, NEW_TOKENS = 64, 256
TINY_MODEL = {"n_ctx": 32, "n_embd": 64, "n_layer": 2, "n_head": 2}
TINY_PROMPT_TOKENS, TINY_NEW_TOKENS, TINY_VOCAB = 8, 24, 256
# Initial weights far wider than GPT-1's 0.02: at 0.02 greedy decoding repeats one token, and
# the two sides agreeing on it would say little. The width changes no step's cost.
INIT_STD = 1.0


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


def timed(generate: Callable[[], list[int]], expected: list[int]) -> float:
    """New tokens per second of one `generate()`, whose ids must be `expected`."""
    started = time.perf_counter()
    ids = generate()
    seconds = time.perf_counter() - started
    if ids != expected:
        raise AssertionError(f"greedy ids differ: {ids} against {expected}")
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

    expected = ours()  # also the warm-up of both sides, each checked against it
    tok_s = alternate({"ours": lambda: timed(ours, expected),
                       "transformers": lambda: timed(theirs, expected)}, repeats)
    ours_med, hf_med = median(tok_s["ours"]), median(tok_s["transformers"])
    table = Table("generate", ["model", "dtype", "new tokens/s", "ratio"])
    table.add(model="ours: sample, KV cache", dtype="float32",
              **{"new tokens/s": ours_med, "ratio": ours_med / hf_med})
    table.add(model="transformers OpenAIGPTLMHeadModel.generate", dtype="float32",
              **{"new tokens/s": hf_med, "ratio": 1.0})
    table.notes += [
        f"median of {repeats} alternating repetitions after a warm-up; {new_tokens} greedy "
        f"tokens after a {prompt_tokens}-token random prompt, batch 1, {cfg.n_layer} layers x "
        f"{cfg.n_embd}, vocab {cfg.vocab_size}, n_ctx {cfg.n_ctx}, random weights "
        f"N(0, {cfg.initializer_range:g}), on {device}",
        f"greedy ids identical on both sides (checked on every repetition): "
        f"{len(set(expected))} distinct ids among the {new_tokens}",
        "target: ratio >= 5x"]
    return table, {"tokens_per_second": tok_s, "greedy_ids_identical": True,
                   "distinct_ids": len(set(expected)), "n_ctx": cfg.n_ctx}


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
