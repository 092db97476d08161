"""gpt1.model.generate and `gpt1 generate`: seeded sampling, greedy decoding, context cropping,
and the sample lm_eval writes from its prompt.

The KV cache: cached forward passes equal full ones, `sample` generates what generation
recomputed from scratch would (transformers' own `generate` within n_ctx, a plain windowed loop
past it), and multiple-choice scoring that reuses a context's keys and values scores as pair by
pair scoring does. Decode steps over the static cache neither wait for the device nor copy to
it, keep their shapes, and compile (on CUDA) once per model."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from typer.testing import CliRunner

from bench.generate import transformers_model
from gpt1.cli import app
from gpt1.config import SampleParams
from gpt1.corpus.text import TextCleaner
from gpt1.corpus.tokenizer import GPT1Tokenizer, train_bpe
from gpt1.downstream import zero_shot_heuristics
from gpt1.downstream.zero_shot_heuristics import (
    choice_logprobs,
    choose_answer,
    continuation_logprobs,
)
from gpt1.errors import InputError
from gpt1.model import generate
from gpt1.model.generate import sample, sample_text
from gpt1.model.registry import save_model
from gpt1.model.transformer import GPT1, GPT1Config, KVCache
from tests.conftest import run

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def tiny_model(vocab: int = 20, n_ctx: int = 8) -> GPT1:
    torch.manual_seed(0)
    return GPT1(GPT1Config(vocab_size=vocab, n_ctx=n_ctx, n_embd=16, n_layer=2, n_head=2))


def greedy(model: GPT1, ids: list[int], steps: int) -> list[int]:
    ids = list(ids)
    with torch.no_grad():
        for _ in range(steps):
            window = torch.tensor([ids[-model.config.n_ctx:]])
            ids.append(int(model.lm_logits(model(window))[0, -1].argmax()))
    return ids


def test_same_seed_same_text_and_length() -> None:
    model = tiny_model()
    first = sample(model, [1, 2, 3], 12, temperature=1.0, top_k=None, seed=7)
    assert len(first) == 12 and all(0 <= i < 20 for i in first)
    assert sample(model, [1, 2, 3], 12, temperature=1.0, top_k=None, seed=7) == first
    others = {tuple(sample(model, [1, 2, 3], 12, temperature=1.0, seed=s)) for s in range(5)}
    assert len(others) > 1  # the seed matters
    assert sample(model, [1, 2, 3], 0) == []


def test_temperature_zero_and_top1_are_greedy_even_past_n_ctx() -> None:
    model = tiny_model(n_ctx=8)
    prompt = [1, 2, 3, 4, 5, 6]  # 6 + 10 tokens: the window has to slide
    expected = greedy(model.eval(), prompt, 10)[len(prompt):]
    assert sample(model, prompt, 10, temperature=0.0) == expected
    assert sample(model, prompt, 10, temperature=1.0, top_k=1, seed=3) == expected


def test_bad_arguments() -> None:
    model = tiny_model()
    with pytest.raises(ValueError, match="empty"):
        sample(model, [], 5)
    with pytest.raises(ValueError, match="temperature"):
        sample(model, [1], 5, temperature=-1.0)


PROMPT_TEXT = "The rain fell steadily that evening, and the lamps along the quay were lit."


def _prompted(**settings: object) -> tuple[GPT1, GPT1Tokenizer, SampleParams]:
    tok = GPT1Tokenizer(train_bpe([TextCleaner()(PROMPT_TEXT)] * 20, 80, 2))
    cfg = SampleParams(**{"prompt": PROMPT_TEXT, "tokens": 6, "temperature": 1.0, "top_k": 5,
                          "seed": 3, **settings})
    return tiny_model(vocab=tok.vocab_size, n_ctx=8), tok, cfg


def test_sample_text_reads_the_prompt_as_the_corpus_and_records_its_settings() -> None:
    model, tok, cfg = _prompted()
    record = sample_text(model, tok, cfg)
    prompt_ids = tok.encode(TextCleaner()(PROMPT_TEXT))  # cleaned: spaCy's tokens, lower case
    assert record == {**cfg.model_dump(), "prompt_as_read": tok.decode(prompt_ids),
                      "continuation": tok.decode(sample(model, prompt_ids, 6, 1.0, 5, 3))}
    assert list(record) == ["prompt", "tokens", "temperature", "top_k", "seed",
                            "prompt_as_read", "continuation"]
    assert record["prompt_as_read"] != PROMPT_TEXT
    assert sample_text(model, tok, cfg) == record  # seeded


def test_a_prompt_with_no_token_names_the_key() -> None:
    model, tok, cfg = _prompted(prompt="   ")
    with pytest.raises(InputError, match=r"^lm_eval\.sample\.prompt: the prompt is empty after "
                                         r"tokenisation$"):
        sample_text(model, tok, cfg)


@pytest.fixture()
def model_dir(tmp_path: Path) -> Path:
    text = "the cat sat on the mat . the dog sat on the log . " * 20
    tokenizer = train_bpe([text], vocab_size=60, min_frequency=1)
    model = tiny_model(vocab=tokenizer.get_vocab_size(), n_ctx=16)
    save_model(model, tmp_path)
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    return tmp_path


def test_cli_generates_from_a_saved_model(model_dir: Path) -> None:
    args = ["generate", "--model", str(model_dir), "--prompt", "The cat", "--max-tokens", "5",
            "--temperature", "0"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert result.output.startswith("the cat")
    assert CliRunner().invoke(app, args).output == result.output  # greedy: reproducible

    missing = CliRunner().invoke(app, ["generate", "--model", str(model_dir / "nope"),
                                       "--prompt", "x"])
    assert missing.exit_code == 2 and "not found" in missing.output


def _cut_short(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:100])


def _lengthen(path: Path) -> None:
    path.write_text(path.read_text().replace('"n_ctx": 16', '"n_ctx": 17'))


BAD_MODEL_FILES: dict[str, tuple[str, Callable[[Path], None], str]] = {
    "config not JSON": ("config.json", lambda p: p.write_text('{"vocab_size": 60,'),
                        "config.json: not JSON ("),
    "config of other weights": ("config.json", _lengthen,
                                "model.safetensors: positions_embed.weight has shape (16, 16), "
                                "but config.json makes it (17, 16)"),
    "weights cut short": ("model.safetensors", _cut_short,
                          "model.safetensors: not a readable safetensors file ("),
}


@pytest.mark.parametrize("case", BAD_MODEL_FILES)
def test_cli_bad_model_file_is_one_line(model_dir: Path, case: str) -> None:
    name, corrupt, message = BAD_MODEL_FILES[case]
    corrupt(model_dir / name)
    before = {p.name: p.read_bytes() for p in model_dir.iterdir()}
    proc = run([sys.executable, "-m", "gpt1.cli", "generate", "--model", str(model_dir),
                "--prompt", "the cat"], model_dir, check=False)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"error: {model_dir}/{message}"), proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert {p.name: p.read_bytes() for p in model_dir.iterdir()} == before



V = 50


def cache_model(n_ctx: int = 32, initializer_range: float = 0.02) -> GPT1:
    torch.manual_seed(0)
    return GPT1(GPT1Config(vocab_size=V, n_ctx=n_ctx, n_embd=32, n_layer=2, n_head=4,
                           initializer_range=initializer_range)).eval()


def varied_model(n_ctx: int) -> GPT1:
    """Initial weights far wider than GPT-1's 0.02: peaked logits, whose greedy text varies
    (at 0.02 it repeats one token)."""
    return cache_model(n_ctx, initializer_range=1.0)


def random_ids(n: int, seed: int = 1) -> list[int]:
    return torch.randint(0, V, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


@torch.no_grad()
def test_cached_logits_equal_the_full_forward_at_every_position() -> None:
    model = cache_model()
    ids = torch.randint(0, V, (2, 20), generator=torch.Generator().manual_seed(1))
    full = model.lm_logits(model(ids))
    cache = KVCache(model.config.n_layer, model.config.n_ctx)
    # a prefill, single tokens, then several tokens after a past (the masked path)
    chunks = [ids[:, :7], ids[:, 7:8], ids[:, 8:9], ids[:, 9:14], ids[:, 14:]]
    cached = torch.cat([model.lm_logits(model(chunk, cache)) for chunk in chunks], dim=1)
    assert cache.length == 20
    torch.testing.assert_close(cached, full, atol=1e-5, rtol=0)


@torch.no_grad()
def test_padded_prefixes_repeated_rows_equal_each_rows_own_forward() -> None:
    """Contexts of different lengths, right-padded, then each continued in two ways: every row
    is as if computed alone."""
    model = cache_model()
    contexts, continuations = [random_ids(9, 1), random_ids(4, 2)], [random_ids(5, s) for s in
                                                                      range(3, 7)]
    cache = KVCache(model.config.n_layer, 9 + 5)
    padded = torch.zeros(2, 9, dtype=torch.long)
    for row, ctx in enumerate(contexts):
        padded[row, :len(ctx)] = torch.tensor(ctx)
    model(padded, cache)
    cache.mark_padding(torch.tensor([9, 4]))
    cache.repeat_rows(torch.tensor([2, 2]))
    logits = model.lm_logits(model(torch.tensor(continuations), cache))
    for row, cont in enumerate(continuations):
        alone = model.lm_logits(model(torch.tensor([contexts[row // 2] + cont])))[0, -5:]
        torch.testing.assert_close(logits[row], alone, atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="already marked"):
        cache.mark_padding(torch.tensor([1, 1, 1, 1]))


def test_a_cache_is_refused_in_training_and_past_n_ctx() -> None:
    model = cache_model(n_ctx=8)
    cache = KVCache(model.config.n_layer, 8)
    with pytest.raises(ValueError, match="inference"):
        model.train()(torch.zeros(1, 2, dtype=torch.long), cache)
    model.eval()(torch.zeros(1, 6, dtype=torch.long), cache)
    with pytest.raises(ValueError, match="sequence length 9 exceeds n_ctx 8"):
        model(torch.zeros(1, 3, dtype=torch.long), cache)


def test_greedy_equals_transformers_generate_within_n_ctx() -> None:
    model = varied_model(n_ctx=32)
    prompt, new = random_ids(8), 24  # 32 tokens: the whole of n_ctx
    ours = sample(model, prompt, new, temperature=0.0)
    theirs = transformers_model(model).generate(
        torch.tensor([prompt]), max_new_tokens=new, min_new_tokens=new, do_sample=False,
        pad_token_id=0)[0, len(prompt):].tolist()
    assert ours == theirs
    assert len(set(ours)) > 5  # not one token repeated


@torch.no_grad()
def windowed_greedy(model: GPT1, ids: list[int], steps: int) -> list[int]:
    """Greedy decoding recomputing the last n_ctx tokens whole at every step."""
    ids = list(ids)
    for _ in range(steps):
        window = torch.tensor([ids[-model.config.n_ctx:]])
        ids.append(int(model.lm_logits(model(window))[0, -1].argmax()))
    return ids


def test_greedy_past_n_ctx_equals_recomputing_the_window() -> None:
    model = varied_model(n_ctx=8)
    prompt = random_ids(5)  # 5 + 15 tokens: cached up to 8, then the window slides
    expected = windowed_greedy(model, prompt, 15)[len(prompt):]
    assert sample(model, prompt, 15, temperature=0.0) == expected
    assert len(set(expected)) > 2  # not one token repeated


@pytest.mark.parametrize("prompt_length", [70, 100])
def test_greedy_over_several_read_outs_and_past_n_ctx_equals_recomputing_the_window(
        prompt_length: int) -> None:
    """More new ids than two read-outs take, past n_ctx (96): from a prompt the cache holds, or
    one longer than n_ctx, which only the window sees."""
    model = varied_model(n_ctx=96)
    prompt, new = random_ids(prompt_length), 2 * generate.READ_OUT + 10
    expected = windowed_greedy(model, prompt, new)[len(prompt):]
    assert sample(model, prompt, new, temperature=0.0) == expected
    assert len(set(expected)) > 5


aten = torch.ops.aten
SYNCS = {aten._local_scalar_dense, aten.nonzero, aten.masked_select}  # the host waits on these
FROM_PYTHON = {aten.lift_fresh, aten.lift_fresh_copy}  # torch.tensor(data): a copy in, on CUDA


@dataclass
class Step:
    """The ops of one token's step: what reads the device back, what brings Python data to it,
    and the shapes attention sees (its tensors', its mask's), layer after layer."""

    syncs: list[str] = field(default_factory=list)
    from_python: int = 0
    attention: list[tuple[tuple[int, ...], ...]] = field(default_factory=list)


class StepOps(TorchDispatchMode):
    """Each op `sample` runs (greedy), in the step of the token it leads to: a step ends as its
    token is chosen (`aten.argmax`). The first step is the prompt's; the last, the read-out's."""

    def __init__(self) -> None:
        super().__init__()
        self.steps = [Step()]

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (),
                           kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        step, op = self.steps[-1], func.overloadpacket
        if op in SYNCS or (op is aten.index and any(i is not None and i.dtype == torch.bool
                                                    for i in args[1])):  # sized by the data
            step.syncs.append(str(op))
        step.from_python += op in FROM_PYTHON
        if "scaled_dot_product" in str(op):
            step.attention.append(tuple(tuple(t.shape) for t in [*args, *kwargs.values()]
                                        if isinstance(t, torch.Tensor)))
        if op is aten.argmax:
            self.steps.append(Step())
        return func(*args, **kwargs)


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_decode_steps_neither_wait_for_the_device_nor_copy_to_it_and_keep_their_shapes(
        monkeypatch: pytest.MonkeyPatch, temperature: float) -> None:
    """After the prompt's step, no token's step syncs with the device or brings it Python data
    (the read-outs, every 4 tokens here, are `tolist`, which dispatches nothing on the CPU), and
    attention sees the same shapes at every decode step (all the cache's slots), then at every
    step of the sliding window; greedy, or drawn (top-k) as before the cache."""
    monkeypatch.setattr(generate, "READ_OUT", 4)
    model = varied_model(n_ctx=8)
    prompt, new = random_ids(3), 12  # the prompt, 5 decode steps, 6 of the window
    with StepOps() as ops:
        ids = sample(model, prompt, new, temperature=temperature, top_k=10, seed=2)
    expected = (windowed_greedy(model, prompt, new)[len(prompt):] if temperature == 0 else
                previous_sample(model, prompt, new, temperature, top_k=10, seed=2))
    assert ids == expected
    assert len(ops.steps) == new + 1
    assert ops.steps[0].from_python == 1  # the prompt
    for step in ops.steps[1:]:
        assert step.syncs == [] and step.from_python == 0
    decode, window = ops.steps[1:6], ops.steps[6:new]
    shapes = {tuple(step.attention) for step in decode}
    assert len(shapes) == 1 and len(decode[0].attention) == model.config.n_layer
    _, keys, _, mask = decode[0].attention[0]
    assert keys[2] == mask[-1] == 8  # every slot: n_ctx here
    assert len({tuple(step.attention) for step in window}) == 1


def test_on_cuda_the_decode_step_is_one_graph_compiled_once_per_model(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """What `sample` compiles on CUDA, traced here on the CPU into a graph that counts itself:
    the decode step whole (fullgraph) in CUDA graphs' mode, once per model and shapes, over
    cache tensors marked static that later runs of those shapes reuse. Its ids are eager's."""
    import torch._dynamo

    prompt, new = random_ids(5), 10
    model, other = varied_model(n_ctx=32), varied_model(n_ctx=32)
    runs = [{"max_new_tokens": new, "temperature": 0.0},
            {"max_new_tokens": new, "temperature": 0.8, "top_k": 10, "seed": 1}]
    eager = [sample(model, prompt, **run) for run in runs]
    longer = sample(model, prompt, new + 3, temperature=0.0)
    compiles, graphs, marked = [], [], []
    compile_, mark = torch.compile, torch._dynamo.mark_static_address

    def counted(fn: Callable, *, mode: str, fullgraph: bool) -> Callable:
        compiles.append((mode, fullgraph))
        return compile_(fn, fullgraph=fullgraph,
                        backend=lambda gm, inputs: graphs.append(gm) or gm.forward)

    monkeypatch.setattr(generate, "_compiles", lambda device: True)
    monkeypatch.setattr(torch, "compile", counted)
    monkeypatch.setattr(torch._dynamo, "mark_static_address",
                        lambda t: marked.append(tuple(t.shape)) or mark(t))
    torch._dynamo.reset()
    try:
        for net in (model, model, other):
            assert [sample(net, prompt, **run) for run in runs] == eager
        assert compiles == [("reduce-overhead", True)] * 2  # one a model
        assert len(graphs) == 2  # none for later runs, nor for a model's later steps
        assert marked == [(1, 4, 5 + new, 8)] * 2 * (2 * model.config.n_layer)  # first runs'
        assert sample(model, prompt, new + 3, temperature=0.0) == longer
        assert len(graphs) == 3 and marked[-1] == (1, 4, 5 + new + 3, 8)
    finally:
        torch._dynamo.reset()


@torch.no_grad()
def previous_sample(model: GPT1, prompt: list[int], new: int, temperature: float, top_k: int,
                    seed: int) -> list[int]:
    """`sample` as it was before the cache: the whole window every token."""
    generator = torch.Generator().manual_seed(seed)
    ids = list(prompt)
    for _ in range(new):
        window = torch.tensor([ids[-model.config.n_ctx:]])
        logits = model.lm_logits(model(window)[:, -1]).float()[0] / temperature
        cutoff = torch.topk(logits, top_k).values[-1]
        logits = logits.masked_fill(logits < cutoff, float("-inf"))
        ids.append(int(torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator)))
    return ids[len(prompt):]


@pytest.mark.parametrize("n_ctx", [32, 8])
def test_sampling_draws_what_it_drew_before(n_ctx: int) -> None:
    model = varied_model(n_ctx)
    prompt = random_ids(6)
    for seed in range(3):
        expected = previous_sample(model, prompt, 20, temperature=0.8, top_k=10, seed=seed)
        assert sample(model, prompt, 20, temperature=0.8, top_k=10, seed=seed) == expected


def test_choices_after_a_shared_context_score_as_pair_by_pair(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Contexts of several lengths (one too long to share, one empty), choices of one token and
    more, batches split by size and by n_ctx: each choice's log-probabilities are the pair's
    own."""
    model = cache_model(n_ctx=16)
    contexts = [random_ids(n, seed) for seed, n in enumerate([3, 10, 1, 14, 0, 6])]
    choices = [[random_ids(n, 10 * i + j) for j, n in enumerate(lengths)]
               for i, lengths in enumerate([[1, 2], [3, 1], [8, 4], [2, 4], [3, 2], [1, 1]])]
    pairs = continuation_logprobs(model, [c for c, cs in zip(contexts, choices, strict=True)
                                          for _ in cs], [c for cs in choices for c in cs])
    batches: list[int] = []
    shared_batch = zero_shot_heuristics._shared_context_batch

    def counted(model: GPT1, contexts: list[list[int]],
                choices: list[list[list[int]]]) -> list[list[np.ndarray]]:
        batches.append(len(contexts))
        return shared_batch(model, contexts, choices)

    monkeypatch.setattr(zero_shot_heuristics, "_shared_context_batch", counted)
    # contexts 0, 1, 2 and 5 are shared; at 32 pairs a batch, 2 still starts a batch: its choice
    # of 8 tokens after context 1's 10 would pass n_ctx
    for batch_size, expected_batches in [(2, [1, 1, 1, 1]), (32, [2, 2])]:
        batches.clear()
        shared = [lp for group in choice_logprobs(model, contexts, choices, batch_size)
                  for lp in group]
        assert batches == expected_batches
        assert [len(lp) for lp in shared] == [len(lp) for lp in pairs]
        for got, expected in zip(shared, pairs, strict=True):
            np.testing.assert_allclose(got, expected, atol=1e-5, rtol=0)
    flat = np.array([lp.mean() for lp in pairs]).reshape(len(contexts), 2)
    assert choose_answer(model, contexts, choices).tolist() == flat.argmax(axis=1).tolist()
