"""gpt1.downstream.zero_shot_heuristics: the paper's zero-shot heuristics (§5) on a language model
rigged by hand, a bigram table, where the right answer is known."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest
import torch
from sklearn.metrics import matthews_corrcoef

from gpt1.downstream.zero_shot_heuristics import (
    Examples,
    ZeroShotTask,
    best_threshold,
    choose_answer,
    choose_by_word,
    continuation_logprobs,
    mean_logprobs,
    zero_shot_predictions,
    zero_shot_score,
)
from gpt1.model.trunk import Trunk, TrunkConfig

V = 8
A, B, C, D, VERY, NEG, POS, E = range(V)


@dataclass(frozen=True)
class BigramConfig(TrunkConfig):
    model_type: ClassVar[str] = "bigram"
    vocab_size: int = V
    n_ctx: int = 16
    n_embd: int = V
    initializer_range: float = 0.02

    def parameter_count(self) -> int:
        return V * V

    def training_flops_per_token(self) -> float:
        return 0.0


class Bigram(Trunk):
    """The next token's log-probabilities are row `prev` of `table`: the hidden state is the
    one-hot previous token, and the LM head is the table's transpose."""

    config_class = BigramConfig

    def __init__(self, table: torch.Tensor) -> None:
        super().__init__(BigramConfig())
        self.table = torch.nn.Parameter(torch.log_softmax(table, dim=1))

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.one_hot(input_ids, V).float()

    @property
    def lm_head_weight(self) -> torch.Tensor:
        return self.table.T


def _uniform_but(**favoured: tuple[int, float]) -> Bigram:
    """A uniform bigram table, except `prev=(next, logit)` rows favouring one next token."""
    table = torch.zeros(V, V)
    for prev, (nxt, logit) in favoured.items():
        table[int(prev.removeprefix("t")), nxt] = logit
    return Bigram(table)


def test_logprobs_are_the_tables_and_a_bare_sentence_skips_its_first_token() -> None:
    model = _uniform_but(**{f"t{A}": (B, 3.0)})
    (with_context,), (bare,) = (continuation_logprobs(model, [[A]], [[B, C]]),
                                continuation_logprobs(model, [[]], [[A, B, C]]))
    favoured = 3.0 - math.log(math.exp(3.0) + V - 1)
    assert with_context == pytest.approx([favoured, -math.log(V)])
    assert bare == pytest.approx([favoured, -math.log(V)])  # A is not predicted from anything
    assert np.isnan(mean_logprobs(model, [[]], [[A]])[0])  # nothing to score


def test_a_batch_of_pairs_is_scored_as_each_pair_alone_in_one_read_a_batch(
        device_reads: list[str]) -> None:
    model = _uniform_but(**{f"t{A}": (B, 3.0)}, **{f"t{B}": (C, 1.0)})
    contexts, continuations = [[A], [], [A], [C, A]], [[B, C], [A, B, C], [], [B]]
    alone = [continuation_logprobs(model, [c], [t])[0] for c, t in zip(contexts, continuations,
                                                                     strict=True)]
    device_reads.clear()
    together = continuation_logprobs(model, contexts, continuations, batch_size=3)
    assert device_reads == ["cpu", "numpy"] * 2  # a read for each of the 2 batches
    assert [len(x) for x in together] == [2, 2, 0, 1]
    for got, expected in zip(together, alone, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_a_long_pair_loses_context_from_its_start() -> None:
    model = _uniform_but(**{f"t{A}": (B, 3.0)})
    long_context = [C] * 40 + [A]  # n_ctx is 16
    (logprobs,) = continuation_logprobs(model, [long_context], [[B]])
    assert logprobs == pytest.approx([3.0 - math.log(math.exp(3.0) + V - 1)])


@pytest.mark.parametrize("favoured, expected", [(POS, 1), (NEG, 0)])
def test_sst2_takes_the_word_the_lm_prefers_after_very(favoured: int, expected: int) -> None:
    model = _uniform_but(**{f"t{VERY}": (favoured, 2.0)})
    texts = [[A, B], [C], [D, A, C, B]]
    assert choose_by_word(model, texts, [VERY], [[NEG], [POS]]).tolist() == [expected] * 3


def test_multiple_choice_takes_the_likeliest_answer_per_token() -> None:
    """After C the LM expects D, after D it expects D again: the all-D answer wins, wherever it
    stands among the choices; a longer answer is not penalised for its length."""
    model = _uniform_but(**{f"t{C}": (D, 4.0), f"t{D}": (D, 4.0)})
    contexts = [[A, C], [B, C]]
    choices = [[[A, B], [D, D, D]], [[D], [E, A, B]]]
    assert choose_answer(model, contexts, choices).tolist() == [1, 0]
    with pytest.raises(ValueError, match=r"same number of choices; these have \[1, 2\]"):
        choose_answer(model, [[A], [B]], [[[A]], [[A], [B]]])


def test_cola_threshold_fitted_on_train_separates_dev() -> None:
    """Acceptable sentences follow the LM's favourite bigrams (A B, B C), the others do not."""
    model = _uniform_but(**{f"t{A}": (B, 4.0), f"t{B}": (C, 4.0)})
    good, bad = [[A, B, C], [A, B], [B, C]], [[C, A, E], [E, E], [D, A]]
    sentences, labels = good + bad, np.array([1, 1, 1, 0, 0, 0])
    scores = mean_logprobs(model, [[] for _ in sentences], sentences)
    threshold = best_threshold(scores, labels, matthews_corrcoef)
    dev = [[B, C], [D, E, A]]
    dev_scores = mean_logprobs(model, [[], []], dev)
    assert ((dev_scores >= threshold).astype(int) == [1, 0]).all()
    with pytest.raises(ValueError, match="no finite score"):
        best_threshold(np.array([np.nan]), np.array([1]), matthews_corrcoef)


@pytest.mark.parametrize("trunk", ["gpt1", "lstm"])
def test_a_real_trunk_scores_each_pair_as_it_would_alone(trunk: str) -> None:
    """Batched and padded, each pair's log-probabilities are those of its own forward pass."""
    from gpt1.model.lstm import LSTM, LSTMConfig
    from gpt1.model.transformer import GPT1, GPT1Config

    torch.manual_seed(0)
    model = (GPT1(GPT1Config(vocab_size=V, n_ctx=16, n_embd=16, n_layer=2, n_head=2))
             if trunk == "gpt1" else LSTM(LSTMConfig(vocab_size=V, n_ctx=16, n_embd=16)))
    contexts, continuations = [[A, B, C], [D], []], [[E, A], [B, C, D, E], [A, B]]
    batched = continuation_logprobs(model, contexts, continuations, batch_size=3)
    for ctx, cont, got in zip(contexts, continuations, batched, strict=True):
        seq = torch.tensor([ctx + cont])
        logits = model.lm_logits(model(seq[:, :-1]))[0]
        expected = torch.log_softmax(logits, dim=-1)[torch.arange(seq.shape[1] - 1),
                                                     seq[0, 1:]]
        scored = len(cont) if ctx else len(cont) - 1
        assert got == pytest.approx(expected[-scored:].detach().numpy(), abs=1e-5)


def _accuracy(labels: np.ndarray, predictions: np.ndarray) -> float:
    return 100.0 * float((labels == predictions).mean())


def test_each_heuristic_scores_the_lms_answers_with_the_tasks_metric() -> None:
    """After VERY the LM expects POS; after C it expects D; A B and B C are its favourite
    bigrams: its answers are known, and so are their scores."""
    model = _uniform_but(**{f"t{VERY}": (POS, 4.0), f"t{C}": (D, 4.0), f"t{A}": (B, 4.0),
                            f"t{B}": (C, 4.0)})
    sentiment = ZeroShotTask("sentiment", Examples([[A], [B], [C], [D]], np.array([1, 1, 1, 0])),
                             _accuracy, cue=[VERY], words=[[NEG], [POS]])
    assert zero_shot_predictions(model, sentiment).tolist() == [1, 1, 1, 1]
    assert zero_shot_score(model, sentiment) == 75.0

    choice = ZeroShotTask("choice", Examples([[C], [A, C]], np.array([0, 0]),
                                             [[[D, D], [E]], [[A], [D]]]), _accuracy)
    assert zero_shot_predictions(model, choice).tolist() == [0, 1]
    assert zero_shot_score(model, choice) == 50.0

    def mcc(labels: np.ndarray, predictions: np.ndarray) -> float:
        return 100.0 * matthews_corrcoef(labels, predictions)

    # mean log-probabilities about -1.45, -0.12 | -4.12, -2.08: the threshold falls between
    train = Examples([[A, B, C, E], [B, C], [C, A, E], [E, E]], np.array([1, 1, 0, 0]))
    dev = Examples([[E, D, A], [A, B], [D, E]], np.array([1, 1, 0]))  # the first is mislabelled
    acceptability = ZeroShotTask("acceptability", dev, mcc, train=train)
    assert zero_shot_predictions(model, acceptability).tolist() == [0, 1, 0]
    assert zero_shot_score(model, acceptability) == pytest.approx(mcc(dev.labels,
                                                                     np.array([0, 1, 0])))


@pytest.mark.parametrize("heuristic, needs", [("sentiment", "two words or more"),
                                              ("acceptability", "train examples"),
                                              ("choice", "the dev examples' choices")])
def test_a_heuristic_without_what_it_needs_is_refused(heuristic: str, needs: str) -> None:
    with pytest.raises(ValueError, match=f"the {heuristic} heuristic needs {needs}"):
        ZeroShotTask(heuristic, Examples([[A]], np.array([0])), _accuracy,  # type: ignore[arg-type]
                     words=[[NEG]])
