"""gpt1.training.finetune_loop: each family's head, padding, the auxiliary LM loss, and toy tasks
that a tiny model must learn. (A task's head sized for its labels, gpt1.downstream.task_model:
tests/downstream/test_task_model.py.)"""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import gpt1.training.finetune_loop
from gpt1.config import Family
from gpt1.downstream.families import FAMILIES
from gpt1.model.heads import TaskModel, ignored_padding_loss, lm_loss_on_text
from gpt1.training.finetune_loop import (
    FinetuneResult,
    bucketed_batches,
    finetune,
    pad_batch,
    predict,
    width_multiple,
)
from tests.conftest import read_as_off_the_cpu
from tests.toy_models import CLASSIFY, DELIM, PAD, START, toy_cfg, toy_model

pytestmark = pytest.mark.usefixtures("one_torch_thread")

Examples = list[list[list[int]]]


def seq(*segments: list[int]) -> list[int]:
    """`<start> a <delim> b ... <classify>`."""
    body = [tok for i, s in enumerate(segments) for tok in ([DELIM] if i else []) + s]
    return [START, *body, CLASSIFY]


# Toy tasks, one per family: (examples, targets) from a seed; lengths vary.

def _words(rng: np.random.Generator, group: int) -> list[int]:
    """2 to 7 words of group 0 ({0, 1, 2}), 1 ({3, 4, 5}) or 2 ({6, 7, 8})."""
    return (rng.integers(0, 3, size=rng.integers(2, 8)) + 3 * group).tolist()


def classification(n: int, seed: int) -> tuple[Examples, np.ndarray]:
    """The label is the group of the text's words."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, size=n)
    return [[seq(_words(rng, label))] for label in labels], labels


def entailment(n: int, seed: int) -> tuple[Examples, np.ndarray]:
    """Three labels: the group of the hypothesis' words; the premise is noise."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 3, size=n)
    return [[seq(_words(rng, rng.integers(0, 3)), _words(rng, label))] for label in labels], labels


def similarity(n: int, seed: int) -> tuple[Examples, np.ndarray]:
    """Both texts' words come from the label's group; both orders."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, size=n)
    pairs = [(_words(rng, label), _words(rng, label)) for label in labels]
    return [[seq(a, b), seq(b, a)] for a, b in pairs], labels


def regression(n: int, seed: int) -> tuple[Examples, np.ndarray]:
    """A score 0-5 spelled by the words: both texts repeat word `score`."""
    rng = np.random.default_rng(seed)
    scores = rng.integers(0, 6, size=n)
    pairs = [([s] * rng.integers(1, 5), [s] * rng.integers(1, 5)) for s in scores.tolist()]
    return [[seq(a, b), seq(b, a)] for a, b in pairs], scores.astype(np.float32)


def multiple_choice(n: int, seed: int) -> tuple[Examples, np.ndarray]:
    """Three choices after a noise context; the right one's words are of group 1, the others' 0."""
    rng = np.random.default_rng(seed)
    answers = rng.integers(0, 3, size=n)
    examples = []
    for answer in answers:
        context = _words(rng, rng.integers(0, 3))
        examples.append([seq(context, _words(rng, int(k == answer))) for k in range(3)])
    return examples, answers


TOYS: dict[str, tuple[Family, int, Callable[[int, int], tuple[Examples, np.ndarray]]]] = {
    "classification": ("classification", 2, classification),
    "entailment": ("entailment", 3, entailment),
    "similarity": ("similarity", 2, similarity),
    "regression": ("similarity", 1, regression),
    "multiple_choice": ("multiple_choice", 1, multiple_choice),
}


def test_pad_batch() -> None:
    ids, lengths = pad_batch([[1, 2, 3], [4], [5, 6]], pad_id=PAD)
    assert ids.dtype == torch.long and lengths.tolist() == [3, 1, 2]
    assert ids.tolist() == [[1, 2, 3], [4, PAD, PAD], [5, 6, PAD]]
    ids, lengths = pad_batch([[7, 8]], pad_id=0)
    assert ids.tolist() == [[7, 8]] and lengths.tolist() == [2]


def test_pad_batch_rounds_the_width_up_to_a_multiple_within_n_ctx() -> None:
    ids, lengths = pad_batch([[1, 2, 3], [4]], pad_id=PAD, multiple=4, cap=32)
    assert ids.shape == (2, 4) and lengths.tolist() == [3, 1]
    assert ids.tolist() == [[1, 2, 3, PAD], [4, PAD, PAD, PAD]]
    assert pad_batch([[1] * 5], PAD, multiple=4, cap=32)[0].shape == (1, 8)
    assert pad_batch([[1] * 8], PAD, multiple=4, cap=32)[0].shape == (1, 8)  # a multiple already
    assert pad_batch([[1] * 9], PAD, multiple=8, cap=12)[0].shape == (1, 12)  # not past n_ctx
    assert pad_batch([[1] * 9], PAD, multiple=1, cap=32)[0].shape == (1, 9)


def test_pad_to_multiple_auto_is_64_on_cuda_and_off_on_the_cpu() -> None:
    assert width_multiple("auto", torch.device("cuda")) == 64
    assert width_multiple("auto", torch.device("cpu")) == 1
    assert width_multiple(16, torch.device("cpu")) == width_multiple(16, torch.device("cuda")) == 16


def _epoch(lengths: np.ndarray, seed: int, batch_size: int = 8,
           bucket_batches: int = 4) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return [b.tolist() for b in bucketed_batches(lengths, batch_size, rng, bucket_batches)]


def test_bucketed_batches_cover_each_example_once_and_are_seeded() -> None:
    lengths = np.random.default_rng(0).integers(3, 60, size=203)
    batches = _epoch(lengths, seed=1)
    assert len(batches) == 26  # ceil(203 / 8): one short batch, the last of the last chunk
    assert sorted(len(b) for b in batches)[1:] == [8] * 25
    assert sorted(i for b in batches for i in b) == list(range(203))
    assert batches == _epoch(lengths, seed=1)
    assert batches != _epoch(lengths, seed=2)
    # a second epoch from the same generator is another order, still covering every example
    rng = np.random.default_rng(1)
    first, second = (bucketed_batches(lengths, 8, rng, 4) for _ in range(2))
    assert [b.tolist() for b in first] == batches
    assert sorted(np.concatenate(second).tolist()) == list(range(203))
    assert [b.tolist() for b in second] != batches


def test_bucketed_batches_group_similar_lengths() -> None:
    lengths = np.random.default_rng(0).integers(3, 60, size=640)
    batches = bucketed_batches(lengths, 16, np.random.default_rng(0), bucket_batches=40)
    bucketed = sum(int(lengths[b].max()) * len(b) for b in batches)
    shuffled = np.random.default_rng(0).permutation(640).reshape(-1, 16)
    random = sum(int(lengths[b].max()) * len(b) for b in shuffled)
    assert bucketed < 0.6 * random  # padded tokens: one chunk of the whole set is sorted
    starts = [int(lengths[b].min()) for b in batches]
    assert starts != sorted(starts)  # the batch order is shuffled, not short to long


def test_finetune_trains_on_every_example_each_epoch(monkeypatch: pytest.MonkeyPatch) -> None:
    examples, labels = classification(40, seed=5)
    seen: list[tuple[int, ...]] = []

    def recording(seqs: list[list[int]], pad_id: int,
                  *rounding: int) -> tuple[torch.Tensor, torch.Tensor]:
        seen.extend(map(tuple, seqs))
        return pad_batch(seqs, pad_id, *rounding)

    monkeypatch.setattr(gpt1.training.finetune_loop, "pad_batch", recording)
    finetune(toy_model(), examples, labels, PAD, toy_cfg(epochs=2, batch_size=8))
    expected = sorted(tuple(e[0]) for e in examples)
    assert sorted(seen[:40]) == expected and sorted(seen[40:]) == expected


def test_head_reads_the_last_real_token() -> None:
    model = toy_model().eval()
    seqs = [seq([1, 2, 3, 4]), seq([5]), seq([1, 6, 2])]
    ids, lengths = pad_batch(seqs, PAD)
    with torch.no_grad():
        batched, hidden = model(ids, lengths, 1)
        assert batched.shape == (3, 2) and hidden.shape == (3, 6, 32)
        for row, s in enumerate(seqs):
            torch.testing.assert_close(batched[row], model.head(hidden[row, len(s) - 1]))


def test_head_initialisation_is_the_seeds() -> None:
    model = toy_model(seed=0)
    assert model.head.weight.shape == (2, 32)
    assert torch.equal(model.head.bias, torch.zeros(2))
    assert abs(model.head.weight.std().item() - 0.02) < 0.01
    torch.manual_seed(123)  # the global RNG plays no part
    same = TaskModel(model.trunk, FAMILIES["classification"], 2, 0.1, seed=0)
    other = TaskModel(model.trunk, FAMILIES["classification"], 2, 0.1, seed=1)
    assert torch.equal(same.head.weight, model.head.weight)
    assert not torch.equal(other.head.weight, model.head.weight)


def test_similarity_adds_the_two_orders() -> None:
    model = toy_model("similarity").eval()
    a, b = [1, 2, 3], [4, 5]
    ids, lengths = pad_batch([seq(a, b), seq(b, a)], PAD)
    with torch.no_grad():
        out, hidden = model(ids, lengths, 2)
        expected = model.head(hidden[0, len(a) + len(b) + 2] + hidden[1, len(a) + len(b) + 2])
    assert out.shape == (1, 2)
    torch.testing.assert_close(out[0], expected)
    swapped = predict(model, [[seq(b, a), seq(a, b)]], PAD, batch_size=1)
    np.testing.assert_allclose(swapped, out.numpy(), rtol=0, atol=1e-6)


def test_multiple_choice_gives_a_scalar_per_choice() -> None:
    model = toy_model("multiple_choice", outputs=1).eval()
    examples, answers = multiple_choice(5, seed=0)
    ids, lengths = pad_batch([s for e in examples for s in e], PAD)
    with torch.no_grad():
        out, hidden = model(ids, lengths, 3)
        assert out.shape == (5, 3)
        last = hidden[torch.arange(15), lengths - 1]
        torch.testing.assert_close(out, model.head(last).view(5, 3))
        # the task loss is the cross-entropy of a softmax over each example's choices
        loss = model.loss(out, torch.tensor(answers))
        expected = -out.log_softmax(dim=1)[torch.arange(5), torch.tensor(answers)].mean()
        torch.testing.assert_close(loss, expected)
    assert predict(model, examples, PAD, batch_size=2).shape == (5, 3)
    assert predict(model, [], PAD, batch_size=2).shape == (0, 0)


def test_sequences_per_example_are_checked() -> None:
    examples, answers = multiple_choice(4, seed=0)
    examples[2] = examples[2][:2]
    with pytest.raises(ValueError, match=r"same number of choices.*\[2, 3\]"):
        finetune(toy_model("multiple_choice", outputs=1), examples, answers, PAD, toy_cfg())
    pairs, labels = similarity(4, seed=0)
    with pytest.raises(ValueError, match=r"similarity example is 2 sequence\(s\).*\[1\]"):
        predict(toy_model("similarity"), [p[:1] for p in pairs], PAD, batch_size=2)
    with pytest.raises(ValueError, match="3 targets for 4 examples"):
        finetune(toy_model("similarity"), pairs, labels[:3], PAD, toy_cfg())


def _padding_ignored(model: TaskModel, hidden: torch.Tensor, ids: torch.Tensor,
                     lengths: torch.Tensor) -> torch.Tensor:
    """`lm_loss_on_text` as it computes off the CPU: the padding's targets ignored."""
    padding = torch.arange(1, ids.shape[1])[None, :] >= lengths[:, None]
    return ignored_padding_loss(model.trunk, hidden, ids, padding)


@pytest.mark.parametrize("lm_loss", [lm_loss_on_text, _padding_ignored])
def test_lm_loss_on_text_ignores_padding(lm_loss: Callable[..., torch.Tensor]) -> None:
    model = toy_model().eval()
    seqs = [seq([1, 2, 3, 4]), seq([5, 6])]
    ids, lengths = pad_batch(seqs, PAD)
    with torch.no_grad():
        _, hidden = model(ids, lengths, 1)
        loss = lm_loss(model, hidden, ids, lengths)
        # whatever sits in the padding changes nothing
        other = ids.clone()
        other[1, 4:] = torch.tensor([3, 7])
        _, other_hidden = model(other, lengths, 1)
        assert lm_loss(model, other_hidden, other, lengths) == loss
        # it is the mean over the real next-token predictions: 5 + 3 of them
        terms = []
        for s in seqs:
            logits = model.trunk.lm_logits(model.trunk(torch.tensor([s])))[0]
            terms.append(F.cross_entropy(logits[:-1], torch.tensor(s[1:]), reduction="sum"))
        torch.testing.assert_close(loss, sum(terms) / 8)


def _quality(name: str, outputs: np.ndarray, target: np.ndarray) -> float:
    """Accuracy, or for regression the Pearson correlation of the scores."""
    if name == "regression":
        return float(np.corrcoef(outputs[:, 0], target)[0, 1])
    return float((outputs.argmax(axis=1) == target).mean())


@pytest.mark.parametrize("trunk", ["gpt1", "lstm"])
@pytest.mark.parametrize("name", TOYS)
def test_each_family_learns_its_toy_task(name: str, trunk: str) -> None:
    family, outputs, make = TOYS[name]
    train, train_targets = make(192, 0)
    dev, dev_targets = make(100, 1)
    model = toy_model(family, outputs, dropout=0.1, trunk=trunk)
    before = _quality(name, predict(model, dev, PAD, batch_size=32), dev_targets)
    epochs_seen: list[int] = []
    epoch_losses: list[float] = []

    def on_epoch(epoch: int, m: TaskModel, train_loss: float) -> None:
        epochs_seen.append(epoch)
        epoch_losses.append(train_loss)
        m.eval()  # finetune must put the model back into training mode itself

    result = finetune(model, train, train_targets, PAD, toy_cfg(), on_epoch)
    assert isinstance(result, FinetuneResult)
    assert result.steps == 3 * 12 and epochs_seen == [1, 2, 3]
    assert np.isfinite(result.train_loss)
    assert epoch_losses[2] < epoch_losses[0], epoch_losses  # the loss falls
    dev_out = predict(model, dev, PAD, batch_size=32)
    width = 3 if family == "multiple_choice" else outputs
    assert dev_out.shape == (100, width) and dev_out.dtype == np.float32
    after = _quality(name, dev_out, dev_targets)
    assert after >= 0.9, f"{name}: dev {after:.2f} after training (before: {before:.2f})"
    assert not model.training  # predict leaves it in eval mode


@pytest.mark.parametrize("trunk", ["gpt1", "lstm"])
@pytest.mark.parametrize("name", TOYS)
def test_outputs_do_not_depend_on_the_batch_padding(name: str, trunk: str) -> None:
    family, outputs, make = TOYS[name]
    model = toy_model(family, outputs, trunk=trunk)
    examples, _ = make(12, seed=4)
    together = predict(model, examples, PAD, batch_size=12)
    alone = np.concatenate([predict(model, [e], PAD, batch_size=1) for e in examples])
    np.testing.assert_allclose(together, alone, rtol=0, atol=1e-5)
    pieces = predict(model, examples, PAD, batch_size=5)
    np.testing.assert_allclose(pieces, together, rtol=0, atol=1e-5)


@pytest.mark.parametrize("trunk", ["gpt1", "lstm"])
@pytest.mark.parametrize("name", TOYS)
def test_outputs_do_not_depend_on_rounded_widths(name: str, trunk: str) -> None:
    """Widths rounded up to a multiple, and a short last batch filled up with copies: the
    outputs of each width as it is."""
    family, outputs, make = TOYS[name]
    model = toy_model(family, outputs, trunk=trunk)
    examples, _ = make(13, seed=4)
    as_is = predict(model, examples, PAD, batch_size=5, pad_to_multiple=1)
    rounded = predict(model, examples, PAD, batch_size=5, pad_to_multiple=8)
    assert rounded.shape == as_is.shape
    np.testing.assert_allclose(rounded, as_is, rtol=0, atol=1e-5)


def varied_lengths(n: int, seed: int) -> tuple[Examples, np.ndarray]:
    """Classification examples of every length from 3 to the toy model's n_ctx (32)."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, size=n)
    return ([[seq((rng.integers(0, 3, size=rng.integers(1, 31)) + 3 * label).tolist())]
             for label in labels], labels)


def attention_shapes(model: TaskModel) -> tuple[list[tuple[int, ...]], Callable[[], None]]:
    """The (rows, width) of every input the first block's attention is given, and how to stop
    recording."""
    shapes: list[tuple[int, ...]] = []
    handle = model.trunk.h[0].attn.register_forward_pre_hook(
        lambda module, args: shapes.append(tuple(args[0].shape[:2])))
    return shapes, handle.remove


@pytest.mark.parametrize("multiple", [1, 8])
def test_an_epoch_meets_at_most_one_attention_shape_per_bucket(multiple: int) -> None:
    """Widths rounded to multiples of 8 within n_ctx 32: 4 buckets, so at most 4 shapes in an
    epoch's 12 full batches, and one more for its one short batch (100 examples, 8 a batch);
    prediction fills its short batch up, so it meets at most the 4. Each batch padded to its own
    longest (multiple 1) meets many more."""
    examples, labels = varied_lengths(100, seed=2)
    model = toy_model()
    shapes, stop = attention_shapes(model)
    result = finetune(model, examples, labels, PAD, toy_cfg(epochs=1, batch_size=8,
                                                            pad_to_multiple=multiple))
    trained, shapes[:] = list(shapes), []
    predict(model, examples, PAD, batch_size=8, pad_to_multiple=multiple)
    stop()
    assert len(trained) == len(shapes) == 13 and result.batch_shapes == len(set(trained))
    buckets = 32 // 8
    if multiple == 8:
        assert {width for _, width in trained + shapes} <= {8, 16, 24, 32}
        assert len(set(trained)) <= buckets + 1 and len(set(shapes)) <= buckets
        assert {rows for rows, _ in shapes} == {8}
    else:
        assert len(set(trained)) > buckets + 1 and len(set(shapes)) > buckets + 1


def _trained(lm_coef: float, weight_decay: float = 0.01) -> TaskModel:
    examples, labels = similarity(48, seed=3)
    model = toy_model("similarity", dropout=0.1)
    finetune(model, examples, labels, PAD,
             toy_cfg(epochs=1, lm_coef=lm_coef, weight_decay=weight_decay))
    return model


def test_finetune_is_reproducible() -> None:
    a, b = _trained(0.5), _trained(0.5)
    for (name, pa_), pb_ in zip(a.named_parameters(), b.parameters(), strict=True):
        assert torch.equal(pa_, pb_), name


def test_losses_read_at_log_steps_give_the_same_run(monkeypatch: pytest.MonkeyPatch,
                                                    loss_reads: list[int]) -> None:
    """Off the CPU the losses are read at the progress display's steps and each epoch's end:
    the epochs' losses and the weights are those of a run that reads them every step. Here the
    CPU is made to read as a GPU does."""
    examples, labels = classification(128, seed=4)  # 16 steps an epoch: a read every 3
    runs = []
    for at_log_steps in (False, True):
        if at_log_steps:
            read_as_off_the_cpu(monkeypatch, gpt1.training.finetune_loop)
        loss_reads.clear()
        model, epoch_losses = toy_model(dropout=0.1), []
        result = finetune(model, examples, labels, PAD, toy_cfg(epochs=2, batch_size=8),
                          lambda epoch, m, loss, seen=epoch_losses: seen.append(loss))
        runs.append((list(loss_reads), epoch_losses, result.train_loss, model))
    (every_reads, every_losses, every_loss, a), (log_reads, log_losses, log_loss, b) = runs
    assert every_reads == list(range(1, 33))
    assert log_reads == [1, 3, 6, 9, 12, 15, 16, 18, 21, 24, 27, 30, 32]  # and epochs' ends
    assert log_losses == every_losses and log_loss == every_loss
    for (name, pa_), pb_ in zip(a.named_parameters(), b.parameters(), strict=True):
        assert torch.equal(pa_, pb_), name


def test_a_non_finite_loss_stops_fine_tuning() -> None:
    examples, _ = regression(16, seed=0)
    scores = np.full(len(examples), np.nan, dtype=np.float32)  # every batch's loss is NaN
    epochs: list[int] = []
    with pytest.raises(FloatingPointError, match="finetune: the loss became nan at step 1"):
        finetune(toy_model("similarity", outputs=1), examples, scores, PAD, toy_cfg(),
                 lambda epoch, m, loss: epochs.append(epoch))
    assert not epochs


def test_lm_coef_zero_turns_the_lm_loss_off() -> None:
    with_lm, without = _trained(0.5, weight_decay=0.0), _trained(0.0, weight_decay=0.0)
    assert not torch.equal(with_lm.head.weight, without.head.weight)
    unused = 8  # never an input: only the LM loss, through the tied head, reaches its embedding
    initial = toy_model("similarity").trunk.tokens_embed.weight[unused]
    assert torch.equal(without.trunk.tokens_embed.weight[unused], initial)
    assert not torch.equal(with_lm.trunk.tokens_embed.weight[unused], initial)


def test_a_compiled_run_follows_the_eager_one(caplog: pytest.LogCaptureFixture) -> None:
    """torch.compile (compiled for shapes that vary: batch widths and a short last batch)
    changes how a step computes, not what: the same losses and outputs, to rounding; and one
    compile serves every batch (a recompile per new batch shape would cost more than it saves)."""
    torch._dynamo.reset()  # no graph of an earlier test's
    examples, labels = classification(20, seed=4)
    losses: dict[bool, list[float]] = {False: [], True: []}
    outputs = {}
    for compiled in (False, True):
        model = toy_model()
        with (caplog.at_level(logging.INFO, logger="gpt1.training.finetune_loop"),
              torch._dynamo.config.patch(error_on_recompile=True)):
            result = finetune(
                model, examples, labels, PAD,
                toy_cfg(epochs=2, batch_size=8, compile=compiled, pad_to_multiple=1),
                lambda epoch, model, loss, compiled=compiled: losses[compiled].append(loss))
        assert ("through torch.compile" in caplog.text) == compiled
        assert (result.compute["device"], result.compute["compiled"]) == ("cpu", compiled)
        assert 0 < result.startup_seconds < result.seconds  # the first step, timed apart
        outputs[compiled] = predict(model, examples, PAD, batch_size=8)
    assert losses[True] == pytest.approx(losses[False], rel=1e-4)
    np.testing.assert_allclose(outputs[True], outputs[False], rtol=1e-3, atol=1e-4)


def test_a_bucketed_compiled_run_compiles_a_graph_per_batch_shape(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Widths rounded to 16: two batch shapes (full batches and the short last one, all 16 wide),
    each compiled once as a graph of fixed shapes, their seconds given apart; the losses are the
    eager run's, to rounding. `compile: auto` would compile it on CUDA: its shapes do not vary."""
    examples, labels = classification(20, seed=4)  # sequences of 4 to 9 tokens
    decided: list[bool] = []
    resolve = gpt1.training.finetune_loop.resolve_compile
    monkeypatch.setattr(gpt1.training.finetune_loop, "resolve_compile",
                        lambda setting, device, shapes_vary: decided.append(shapes_vary)
                        or resolve(setting, device, shapes_vary))
    losses: dict[bool, list[float]] = {False: [], True: []}
    results = {}
    for compiled in (False, True):
        torch._dynamo.reset()
        torch._dynamo.utils.counters.clear()
        results[compiled] = finetune(
            toy_model(), examples, labels, PAD,
            toy_cfg(epochs=2, batch_size=8, compile=compiled, pad_to_multiple=16),
            lambda epoch, model, loss, compiled=compiled: losses[compiled].append(loss))
    eager, compiled_run = results[False], results[True]
    assert decided == [False, False]  # fixed shapes, for `auto` to decide on
    assert compiled_run.batch_shapes == eager.batch_shapes == 2
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 2
    assert eager.compile_seconds == 0 < compiled_run.compile_seconds < compiled_run.seconds
    assert losses[True] == pytest.approx(losses[False], rel=1e-4)
