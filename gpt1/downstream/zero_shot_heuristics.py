"""The paper's zero-shot heuristics (§5, Figure 2 right): tasks answered by the pretrained
language model alone, before any fine-tuning, to see what pretraining taught it.

- SST-2: append "very" and compare the probabilities the LM gives the words "positive" and
  "negative" next;
- CoLA: a sentence's average token log-probability, thresholded (the threshold chosen on train);
- multiple choice (Story Cloze, RACE): the answer with the highest average token log-probability
  given the context and question.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from gpt1.config import Heuristic
from gpt1.model.transformer import GPT1, KVCache
from gpt1.model.trunk import Trunk

Sequence = list[int]
Metric = Callable[[np.ndarray, np.ndarray], float]  # (labels, predictions) -> score

# SST-2's prompt: the text, then the cue, then one of the words, in label order (label 1 positive)
SENTIMENT_CUE = "very"
SENTIMENT_WORDS = ("negative", "positive")


def _right_padded(seqs: list[Sequence], width: int, device: torch.device) -> torch.Tensor:
    """(len(seqs), width) ids, each sequence from the left, zeros after it."""
    ids = torch.zeros((len(seqs), width), dtype=torch.long)
    for row, seq in enumerate(seqs):
        ids[row, :len(seq)] = torch.tensor(seq, dtype=torch.long)
    return ids.to(device)


@torch.no_grad()
def continuation_logprobs(model: Trunk, contexts: list[Sequence], continuations: list[Sequence],
                          batch_size: int = 32) -> list[np.ndarray]:
    """Per pair, the log-probability of each continuation token given the context and the
    continuation tokens before it. With an empty context the first token has nothing to be
    predicted from and is left out. A pair longer than `n_ctx` loses context tokens from its
    start."""
    if len(contexts) != len(continuations):
        raise ValueError(f"{len(contexts)} contexts for {len(continuations)} continuations")
    model.eval()
    device = next(model.parameters()).device
    n_ctx = model.config.n_ctx
    out: list[np.ndarray] = []
    for start in range(0, len(contexts), batch_size):
        pairs = list(zip(contexts[start:start + batch_size],
                         continuations[start:start + batch_size], strict=True))
        seqs = [(ctx + cont)[-(n_ctx + 1):] for ctx, cont in pairs]
        ids = _right_padded([seq[:-1] for seq in seqs], max(max(map(len, seqs)) - 1, 1), device)
        logprobs = torch.log_softmax(model.lm_logits(model(ids)).float(), dim=-1)
        rows, positions, targets, counts = [], [], [], []
        for row, ((_, cont), seq) in enumerate(zip(pairs, seqs, strict=True)):
            scored = min(len(cont), len(seq) - 1)  # the first token of a bare sentence: none
            rows += [row] * scored
            positions += range(len(seq) - scored - 1, len(seq) - 1)
            targets += seq[len(seq) - scored:]
            counts.append(scored)
        index = torch.tensor([rows, positions, targets], dtype=torch.long).to(device)
        picked = logprobs[index[0], index[1], index[2]].cpu().numpy()  # one wait a batch
        out += np.split(picked, np.cumsum(counts)[:-1])
    return out


@torch.no_grad()
def choice_logprobs(model: Trunk, contexts: list[Sequence], choices: list[list[Sequence]],
                    batch_size: int = 32) -> list[list[np.ndarray]]:
    """`continuation_logprobs` of each context followed by each of its choices. GPT1 computes a
    context once for all its choices, which reuse its keys and values, where the context is
    not empty and fits in `n_ctx` with each choice; other pairs are scored one by one."""
    if len(contexts) != len(choices):
        raise ValueError(f"{len(contexts)} contexts for {len(choices)} lists of choices")
    model.eval()
    n_ctx, cached = model.config.n_ctx, isinstance(model, GPT1)
    fits = [cached and bool(ctx) and bool(cs) and all(cs)
            and len(ctx) + max(map(len, cs)) <= n_ctx + 1
            for ctx, cs in zip(contexts, choices, strict=True)]
    out: list[list[np.ndarray]] = [[] for _ in contexts]
    alone = [(i, c) for i, cs in enumerate(choices) if not fits[i] for c in cs]
    scored = continuation_logprobs(model, [contexts[i] for i, _ in alone],
                                   [c for _, c in alone], batch_size)
    for (i, _), logprobs in zip(alone, scored, strict=True):
        out[i].append(logprobs)
    shared = [i for i, fit in enumerate(fits) if fit]
    for batch in _batches(shared, contexts, choices, batch_size, n_ctx):
        groups = _shared_context_batch(model, [contexts[i] for i in batch],
                                       [choices[i] for i in batch])
        for i, group in zip(batch, groups, strict=True):
            out[i] = group
    return out


def _batches(groups: list[int], contexts: list[Sequence], choices: list[list[Sequence]],
             batch_size: int, n_ctx: int) -> list[list[int]]:
    """`groups` in order, in batches of at most `batch_size` pairs (or one group) whose longest
    context and longest choice fit in `n_ctx` together (the cache holds both, padded)."""
    batches: list[list[int]] = []
    for i in groups:
        grown = [*batches[-1], i] if batches else [i]
        pairs = sum(len(choices[j]) for j in grown)
        width = (max(len(contexts[j]) for j in grown)
                 + max(len(c) for j in grown for c in choices[j]) - 1)
        if batches and pairs <= batch_size and width <= n_ctx:
            batches[-1].append(i)
        else:
            batches.append([i])
    return batches


def _shared_context_batch(model: GPT1, contexts: list[Sequence],
                          choices: list[list[Sequence]]) -> list[list[np.ndarray]]:
    """`choice_logprobs` of one batch: the contexts (right-padded) in one forward pass into a
    KV cache, then every choice but its last token in a second, over its context's cache rows."""
    device = next(model.parameters()).device
    conts = [c for cs in choices for c in cs]
    lengths = torch.tensor([len(ctx) for ctx in contexts], device=device)
    counts = torch.tensor([len(cs) for cs in choices], device=device)
    longest = max(map(len, contexts))
    width = max(map(len, conts)) - 1  # the choices' tokens fed after the contexts: not the last
    cache = KVCache(model.config.n_layer, longest + width)
    hidden = model(_right_padded(contexts, longest, device), cache)
    # each context's last token predicts its choices' first tokens
    last = hidden[torch.arange(len(contexts), device=device), lengths - 1]
    first = torch.log_softmax(model.lm_logits(last).float(), dim=-1).repeat_interleave(counts, 0)
    targets = _right_padded(conts, width + 1, device)
    logprobs = first.gather(1, targets[:, :1])  # (pairs, 1)
    if width:
        cache.mark_padding(lengths)
        cache.repeat_rows(counts)
        hidden = model(_right_padded([c[:-1] for c in conts], width, device), cache)
        rest = torch.log_softmax(model.lm_logits(hidden).float(), dim=-1)
        logprobs = torch.cat([logprobs, rest.gather(2, targets[:, 1:, None])[..., 0]], dim=1)
    per_pair = [row[:len(c)] for row, c in zip(logprobs.cpu().numpy(), conts, strict=True)]
    bounds = np.cumsum([0, *counts.tolist()])
    return [per_pair[a:b] for a, b in itertools.pairwise(bounds)]


def _mean(logprobs: np.ndarray) -> float:
    return logprobs.mean() if len(logprobs) else np.nan


def mean_logprobs(model: Trunk, contexts: list[Sequence], continuations: list[Sequence],
                  batch_size: int = 32) -> np.ndarray:
    """The average token log-probability of each continuation given its context (NaN where no
    token is scored)."""
    return np.array([_mean(lp) for lp in
                     continuation_logprobs(model, contexts, continuations, batch_size)])


def choose_by_word(model: Trunk, texts: list[Sequence], cue: Sequence, words: list[Sequence],
                   batch_size: int = 32) -> np.ndarray:
    """SST-2's heuristic: for each text followed by `cue` ("very"), the index of the word (among
    `words`, e.g. "negative" and "positive") the LM finds likeliest next (a word of several tokens
    by the product of their probabilities)."""
    scored = choice_logprobs(model, [text + cue for text in texts], [words] * len(texts),
                             batch_size)
    return np.array([[lp.sum() for lp in group] for group in scored]).argmax(axis=1)


def choose_answer(model: Trunk, contexts: list[Sequence], choices: list[list[Sequence]],
                  batch_size: int = 32) -> np.ndarray:
    """Multiple choice: for each context (the story, or passage and question), the index of the
    choice with the highest average token log-probability after it."""
    counts = {len(c) for c in choices}
    if len(counts) > 1:
        raise ValueError(f"every example needs the same number of choices; these have "
                         f"{sorted(counts)}")
    scored = choice_logprobs(model, contexts, choices, batch_size)
    return np.array([[_mean(lp) for lp in group] for group in scored]).argmax(axis=1)


def best_threshold(scores: np.ndarray, labels: np.ndarray, metric: Metric) -> float:
    """CoLA's heuristic, fitted: the threshold on `scores` (a sentence is acceptable, label 1,
    at or above it) that gives the best `metric(labels, predictions)` on these examples."""
    candidates = np.unique(scores[np.isfinite(scores)])
    if not len(candidates):
        raise ValueError("no finite score to choose a threshold from")
    results = [metric(labels, (scores >= t).astype(np.int64)) for t in candidates]
    return float(candidates[int(np.argmax(results))])


@dataclass(frozen=True)
class Examples:
    """One split of a task in token ids: each example's text (for a choice, its context and
    question), its candidate answers (choice only) and its label (the label's or answer's index)."""

    texts: list[Sequence]
    labels: np.ndarray
    choices: list[list[Sequence]] | None = None


@dataclass(frozen=True)
class ZeroShotTask:
    """A task as a heuristic answers it: the examples scored (`dev`) by `metric`, and what the
    heuristic needs besides: sentiment, the cue and one word per label, in label order;
    acceptability, the examples its threshold is fitted on (`train`); choice, `dev.choices`."""

    heuristic: Heuristic
    dev: Examples
    metric: Metric
    train: Examples | None = None
    cue: Sequence = field(default_factory=list)
    words: list[Sequence] = field(default_factory=list)

    def __post_init__(self) -> None:
        given = {"sentiment": len(self.words) >= 2, "acceptability": self.train is not None,
                 "choice": self.dev.choices is not None}
        if not given[self.heuristic]:
            needs = {"sentiment": "two words or more", "acceptability": "train examples",
                     "choice": "the dev examples' choices"}
            raise ValueError(f"the {self.heuristic} heuristic needs {needs[self.heuristic]}")


def _sentence_scores(model: Trunk, examples: Examples, batch_size: int) -> np.ndarray:
    return mean_logprobs(model, [[] for _ in examples.texts], examples.texts, batch_size)


def zero_shot_predictions(model: Trunk, task: ZeroShotTask, batch_size: int = 32) -> np.ndarray:
    """The heuristic's answer to each of `task.dev`'s examples: a label's index (for
    acceptability, 1 where the sentence's score reaches the threshold fitted on `task.train`),
    or a choice's."""
    if task.heuristic == "sentiment":
        return choose_by_word(model, task.dev.texts, task.cue, task.words, batch_size)
    if task.heuristic == "choice":
        assert task.dev.choices is not None  # ZeroShotTask checks it
        return choose_answer(model, task.dev.texts, task.dev.choices, batch_size)
    assert task.train is not None  # ZeroShotTask checks it
    threshold = best_threshold(_sentence_scores(model, task.train, batch_size),
                               task.train.labels, task.metric)
    return (_sentence_scores(model, task.dev, batch_size) >= threshold).astype(np.int64)


def zero_shot_score(model: Trunk, task: ZeroShotTask, batch_size: int = 32) -> float:
    """`task.metric` of the heuristic's answers on `task.dev`."""
    return task.metric(task.dev.labels, zero_shot_predictions(model, task, batch_size))
