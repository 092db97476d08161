"""gpt1.finetune: padding, the auxiliary LM loss, and a toy task that a tiny model must learn."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from gpt1.config import FinetuneTrainParams
from gpt1.finetune import (
    FinetuneResult,
    SequenceClassifier,
    finetune,
    lm_loss_on_text,
    pad_batch,
    predict_logits,
)
from gpt1.model import GPT1, GPT1Config

pytestmark = pytest.mark.usefixtures("one_torch_thread")

V, CTX = 12, 16
START, CLASSIFY, PAD = 9, 10, 11


def classifier(dropout: float = 0.0, seed: int = 0) -> SequenceClassifier:
    torch.manual_seed(seed)
    trunk = GPT1(GPT1Config(vocab_size=V, n_ctx=CTX, n_embd=32, n_layer=2, n_head=2,
                            embd_pdrop=dropout, attn_pdrop=dropout, resid_pdrop=dropout))
    return SequenceClassifier(trunk, n_outputs=2, dropout=dropout)


def test_pad_batch() -> None:
    ids, lengths = pad_batch([[1, 2, 3], [4], [5, 6]], pad_id=PAD)
    assert ids.dtype == torch.long and lengths.tolist() == [3, 1, 2]
    assert ids.tolist() == [[1, 2, 3], [4, PAD, PAD], [5, 6, PAD]]
    ids, lengths = pad_batch([[7, 8]], pad_id=0)
    assert ids.tolist() == [[7, 8]] and lengths.tolist() == [2]


def test_head_reads_the_last_real_token() -> None:
    model = classifier().eval()
    seqs = [[START, 1, 2, 3, 4, CLASSIFY], [START, 5, CLASSIFY], [START, 1, 6, 2, CLASSIFY]]
    ids, lengths = pad_batch(seqs, PAD)
    with torch.no_grad():
        batched, hidden = model(ids, lengths)
        assert hidden.shape == (3, 6, 32)
        for row, seq in enumerate(seqs):  # the same logits as each sequence on its own
            alone, _ = model(torch.tensor([seq]), torch.tensor([len(seq)]))
            torch.testing.assert_close(batched[row], alone[0], rtol=0, atol=1e-5)
            expected = model.head(hidden[row, len(seq) - 1])
            torch.testing.assert_close(batched[row], expected)


def test_head_initialisation() -> None:
    model = classifier()
    assert model.head.weight.shape == (2, 32)
    assert torch.equal(model.head.bias, torch.zeros(2))
    assert abs(model.head.weight.std().item() - 0.02) < 0.01


def test_lm_loss_on_text_ignores_padding() -> None:
    model = classifier().eval()
    seqs = [[START, 1, 2, 3, 4, CLASSIFY], [START, 5, 6, CLASSIFY]]
    ids, lengths = pad_batch(seqs, PAD)
    with torch.no_grad():
        _, hidden = model(ids, lengths)
        loss = lm_loss_on_text(model, hidden, ids, lengths)
        # whatever sits in the padding changes nothing
        other = ids.clone()
        other[1, 4:] = torch.tensor([3, 7])
        _, other_hidden = model(other, lengths)
        assert lm_loss_on_text(model, other_hidden, other, lengths) == loss
        # it is the mean over the real next-token predictions: 5 + 3 of them
        terms = []
        for seq in seqs:
            logits = model.trunk.lm_logits(model.trunk(torch.tensor([seq])))[0]
            terms.append(F.cross_entropy(logits[:-1], torch.tensor(seq[1:]), reduction="sum"))
        torch.testing.assert_close(loss, sum(terms) / 8)


def toy_task(n: int, seed: int) -> tuple[list[list[int]], np.ndarray]:
    """Label 0: words from {0, 1, 2}; label 1: words from {3, 4, 5}; lengths vary."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, size=n)
    seqs = []
    for label in labels:
        words = rng.integers(0, 3, size=rng.integers(2, 10)) + 3 * label
        seqs.append([START, *words.tolist(), CLASSIFY])
    return seqs, labels


def _cfg(**changes: object) -> FinetuneTrainParams:
    base = dict(seed=0, device="cpu", precision="fp32", lr=3e-3, batch_size=16, epochs=3,
                warmup_fraction=0.1, weight_decay=0.01, grad_clip=1.0, lm_coef=0.5,
                clf_dropout=0.1)
    return FinetuneTrainParams(**{**base, **changes})


def test_tiny_finetune_learns_a_separable_task() -> None:
    train_seqs, train_labels = toy_task(192, seed=0)
    dev_seqs, dev_labels = toy_task(100, seed=1)
    model = classifier(dropout=0.1)
    before = predict_logits(model, dev_seqs, PAD, batch_size=32).argmax(1)
    epochs_seen: list[int] = []

    def on_epoch(epoch: int, m: SequenceClassifier) -> None:
        epochs_seen.append(epoch)
        m.eval()  # finetune must put the model back into training mode itself

    result = finetune(model, train_seqs, train_labels, PAD, _cfg(), on_epoch)
    assert isinstance(result, FinetuneResult)
    assert result.steps == 3 * 12 and epochs_seen == [1, 2, 3]
    assert np.isfinite(result.train_loss)
    logits = predict_logits(model, dev_seqs, PAD, batch_size=32)
    assert logits.shape == (100, 2) and logits.dtype == np.float32
    accuracy = float((logits.argmax(1) == dev_labels).mean())
    assert accuracy >= 0.9, f"dev accuracy {accuracy:.2f} (it was {np.mean(before == dev_labels)}"
    assert not model.training  # predict_logits leaves it in eval mode


def test_finetune_without_lm_loss() -> None:
    train_seqs, train_labels = toy_task(64, seed=2)
    model = classifier()
    result = finetune(model, train_seqs, train_labels, PAD, _cfg(lm_coef=0.0, epochs=1))
    assert result.steps == 4 and np.isfinite(result.train_loss)


def test_finetune_is_reproducible() -> None:
    seqs, labels = toy_task(48, seed=3)
    a, b = classifier(dropout=0.1), classifier(dropout=0.1)
    ra = finetune(a, seqs, labels, PAD, _cfg(epochs=1))
    rb = finetune(b, seqs, labels, PAD, _cfg(epochs=1))
    assert ra.train_loss == rb.train_loss
    for pa_, pb_ in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(pa_, pb_)


def test_predict_logits_keeps_order_across_batches() -> None:
    model = classifier()
    seqs, _ = toy_task(10, seed=4)
    whole = predict_logits(model, seqs, PAD, batch_size=10)
    pieces = predict_logits(model, seqs, PAD, batch_size=3)
    np.testing.assert_allclose(pieces, whole, rtol=0, atol=1e-5)
    assert predict_logits(model, [], PAD, batch_size=4).shape == (0, 2)
