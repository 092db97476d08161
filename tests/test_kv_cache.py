"""The KV cache: cached forward passes equal full ones, `sample` generates what generation
recomputed from scratch would (transformers' own `generate` within n_ctx, a plain windowed loop
past it), and multiple-choice scoring that reuses a context's keys and values scores as pair by
pair scoring does."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bench.generate import transformers_model
from gpt1.downstream import zero_shot
from gpt1.downstream.zero_shot import choice_logprobs, choose_answer, continuation_logprobs
from gpt1.model.generate import sample
from gpt1.model.transformer import GPT1, GPT1Config, KVCache

pytestmark = pytest.mark.usefixtures("one_torch_thread")

V = 50


def tiny_model(n_ctx: int = 32, initializer_range: float = 0.02) -> GPT1:
    torch.manual_seed(0)
    return GPT1(GPT1Config(vocab_size=V, n_ctx=n_ctx, n_embd=32, n_layer=2, n_head=4,
                           initializer_range=initializer_range)).eval()


def varied_model(n_ctx: int) -> GPT1:
    """Initial weights far wider than GPT-1's 0.02: peaked logits, whose greedy text varies
    (at 0.02 it repeats one token)."""
    return tiny_model(n_ctx, initializer_range=1.0)


def random_ids(n: int, seed: int = 1) -> list[int]:
    return torch.randint(0, V, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


@torch.no_grad()
def test_cached_logits_equal_the_full_forward_at_every_position() -> None:
    model = tiny_model()
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
    model = tiny_model()
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
    model = tiny_model(n_ctx=8)
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
    model = tiny_model(n_ctx=16)
    contexts = [random_ids(n, seed) for seed, n in enumerate([3, 10, 1, 14, 0, 6])]
    choices = [[random_ids(n, 10 * i + j) for j, n in enumerate(lengths)]
               for i, lengths in enumerate([[1, 2], [3, 1], [8, 4], [2, 4], [3, 2], [1, 1]])]
    pairs = continuation_logprobs(model, [c for c, cs in zip(contexts, choices, strict=True)
                                          for _ in cs], [c for cs in choices for c in cs])
    batches: list[int] = []
    shared_batch = zero_shot._shared_context_batch

    def counted(model: GPT1, contexts: list[list[int]],
                choices: list[list[list[int]]]) -> list[list[np.ndarray]]:
        batches.append(len(contexts))
        return shared_batch(model, contexts, choices)

    monkeypatch.setattr(zero_shot, "_shared_context_batch", counted)
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
