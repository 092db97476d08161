"""`gpt1 export-hf` of a fine-tuned model folder: a classification or entailment model loads as
transformers' `OpenAIGPTForSequenceClassification` and a multiple-choice model as
`OpenAIGPTDoubleHeadsModel`, and each gives our logits; `pipeline("text-classification")` on
cleaned text gives our label and probability; a head whose bias does not fold into the bias-free
`score`, and the similarity family, are refused in one line; the exported tokenizer loads with
`AutoTokenizer` and gives our ids.

Run with `pytest -s` to see the max absolute differences.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import (
    AutoTokenizer,
    OpenAIGPTDoubleHeadsModel,
    OpenAIGPTForSequenceClassification,
    pipeline,
)
from transformers.utils import logging as hf_logging

from gpt1.config import Family, TaskParams
from gpt1.corpus.bpe import SPECIAL_TOKENS, GPT1Tokenizer, train_bpe
from gpt1.downstream.families import family_of
from gpt1.downstream.standalone import save_finetuned, task_card
from gpt1.interop.hf import export_hf
from gpt1.model.heads import TaskModel
from gpt1.model.registry import save_model
from gpt1.model.transformer import GPT1, GPT1Config
from tests.test_hf_interop import invoke, max_diff, perturb_, snapshot

pytestmark = pytest.mark.usefixtures("one_torch_thread")
hf_logging.disable_progress_bar()

TOL = 1e-4
N_CTX = 40
# texts as `TextCleaner` leaves them (spaCy's tokens joined by spaces), accents kept: the BERT
# normaliser of transformers' own OpenAIGPTTokenizer would strip them
CLEANED = ["The café 's film - was n't it GOOD ? Naïve , \" quoted \" .",
           "a good film , a bad plot .", "the story ends well ; i liked it !"]
SHORT = ["a bad plot .", "i liked it !", "the film was good", "it ends ; a bad story"]


def spec(family: Family) -> TaskParams:
    labels = {"classification": ["neg", "mixed", "pos"], "entailment": ["yes", "no"]}
    return TaskParams(title="T", family=family, reader="any", files={"train": "a", "dev": "b"},
                      labels=labels.get(family), metrics=["accuracy" if family != "similarity"
                                                          else "pearson"])


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("bpe") / "tokenizer.json"
    train_bpe(CLEANED * 3, vocab_size=60, min_frequency=2).save(str(path))
    return path


def finetuned(folder: Path, tokenizer: Path, family: Family,
              edit: Callable[[TaskModel], None] | None = None) -> TaskModel:
    """A fine-tuned model folder of `family` in `folder`: a tiny trunk, a head whose bias
    matters, then `edit`; returns the model, in eval mode."""
    task = spec(family)
    torch.manual_seed(0)
    trunk = GPT1(GPT1Config(vocab_size=GPT1Tokenizer.load(tokenizer).vocab_size, n_ctx=N_CTX,
                            n_embd=32, n_layer=2, n_head=4))
    model = TaskModel(trunk, family, family_of(task).n_outputs(task), dropout=0.1, seed=1)
    perturb_(model, seed=2)
    with torch.no_grad():
        model.head.bias.add_(1.0 + torch.linspace(-0.3, 0.3, model.head.out_features))
        if edit is not None:
            edit(model)
    folder.mkdir()
    save_finetuned(folder, model, task_card("tiny_" + family, task, N_CTX, seed=1), tokenizer)
    return model.eval()


def choice_batch(tok: GPT1Tokenizer, examples: int,
                 choices: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Random examples in the multiple-choice layout, `<start> context <delim> choice
    <classify>`, of different lengths, right-padded: ids (B, m, T) and lengths (B, m)."""
    gen = torch.Generator().manual_seed(3)
    words = tok.vocab_size - len(SPECIAL_TOKENS)  # they come last
    context = [torch.randint(1, words, (int(n),), generator=gen).tolist()
               for n in torch.randint(1, 6, (examples,), generator=gen)]
    rows = [[tok.start_id, *context[i // choices], tok.delim_id,
             *torch.randint(1, words, (int(n),), generator=gen).tolist(), tok.classify_id]
            for i, n in enumerate(torch.randint(1, 8, (examples * choices,), generator=gen))]
    lengths = torch.tensor([len(row) for row in rows])
    ids = torch.full((len(rows), int(lengths.max())), tok.pad_id)
    for i, row in enumerate(rows):
        ids[i, :len(row)] = torch.tensor(row)
    assert ids.shape[1] <= N_CTX and len(set(lengths.tolist())) > 1
    return ids.view(examples, choices, -1), lengths.view(examples, choices)


def padded(rows: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """`rows` right-padded with `pad_id`: ids (B, T) and lengths (B,)."""
    lengths = torch.tensor([len(row) for row in rows])
    ids = torch.full((len(rows), int(lengths.max())), pad_id)
    for i, row in enumerate(rows):
        ids[i, :len(row)] = torch.tensor(row)
    return ids, lengths


def labels_batch(tok: GPT1Tokenizer, family: Family) -> tuple[torch.Tensor, torch.Tensor]:
    """Sequences in `family`'s layout, `<start> text <classify>` or `<start> premise <delim>
    hypothesis <classify>`, of our cleaned texts and of random words, of different lengths,
    right-padded: ids (B, T) and lengths (B,)."""
    gen = torch.Generator().manual_seed(4)
    words = tok.vocab_size - len(SPECIAL_TOKENS)  # they come last

    def text() -> list[int]:
        return torch.randint(0, words, (int(torch.randint(1, 12, (1,), generator=gen)),),
                             generator=gen).tolist()

    texts = [tok.encode(t) for t in CLEANED[1:]] + [text() for _ in range(10)]
    if family == "classification":
        rows = [[tok.start_id, *t, tok.classify_id] for t in texts]
    else:
        rows = [[tok.start_id, *a, tok.delim_id, *b, tok.classify_id]
                for a, b in zip(texts, texts[1:] + texts[:1], strict=True)]
    ids, lengths = padded(rows, tok.pad_id)
    assert ids.shape[1] <= N_CTX and len(set(lengths.tolist())) > 1
    return ids, lengths


@pytest.mark.parametrize("family", ["classification", "entailment"])
def test_labels_families_export_as_sequence_classification(tmp_path: Path, tokenizer: Path,
                                                           family: Family) -> None:
    ours = finetuned(tmp_path / "ft", tokenizer, family)
    export_hf(tmp_path / "ft", tmp_path / "hf")
    assert sorted(p.name for p in (tmp_path / "hf").iterdir()) == [
        "config.json", "model.safetensors", "task.json", "tokenizer.json", "tokenizer_config.json"]

    hf, info = OpenAIGPTForSequenceClassification.from_pretrained(tmp_path / "hf",
                                                                  output_loading_info=True)
    hf.eval()
    assert not any(info.values()), info  # no missing, unexpected or mismatched weights
    labels = spec(family).labels
    assert hf.config.architectures == ["OpenAIGPTForSequenceClassification"]
    assert hf.config.id2label == dict(enumerate(labels))
    assert hf.config.label2id == {label: i for i, label in enumerate(labels)}
    assert hf.score.bias is None and hf.score.out_features == len(labels)
    tok = GPT1Tokenizer.load(tokenizer)
    assert hf.config.pad_token_id == tok.pad_id

    ids, lengths = labels_batch(tok, family)
    with torch.no_grad():
        theirs = hf(input_ids=ids, attention_mask=(ids != tok.pad_id).long()).logits
        mine, _ = ours(ids, lengths, 1)
    assert theirs.shape == (len(ids), len(labels))
    # our head's bias moves the logits: a bias-free head on the same states would not match
    assert (ours.head.bias.abs().max() > 1.0).item()
    assert max_diff(mine, theirs, f"{family} ours->HF score") <= TOL
    with torch.no_grad():  # and without a mask: the causal mask hides the padding
        unmasked = hf(input_ids=ids).logits
    assert max_diff(mine, unmasked, f"{family} ours->HF score, no mask") <= TOL


def our_probabilities(model: TaskModel, rows: list[list[int]], pad_id: int) -> torch.Tensor:
    ids, lengths = padded(rows, pad_id)
    with torch.no_grad():
        return model(ids, lengths, 1)[0].softmax(-1)


def exported_pipeline(tmp_path: Path, tokenizer: Path, family: Family
                      ) -> tuple[TaskModel, GPT1Tokenizer, list[str], Any]:
    """Our fine-tuned model of `family`, its tokenizer and labels, and transformers'
    text-classification pipeline over its export."""
    ours = finetuned(tmp_path / "ft", tokenizer, family)
    export_hf(tmp_path / "ft", tmp_path / "hf")
    labels = spec(family).labels
    assert labels is not None
    classify = pipeline("text-classification", model=str(tmp_path / "hf"),
                        tokenizer=str(tmp_path / "hf"))
    return ours, GPT1Tokenizer.load(tokenizer), labels, classify


def test_pipeline_gives_our_label_and_probability(tmp_path: Path, tokenizer: Path) -> None:
    ours, tok, labels, classify = exported_pipeline(tmp_path, tokenizer, "classification")
    texts = CLEANED + SHORT
    probs = our_probabilities(ours, [[tok.start_id, *tok.encode(t), tok.classify_id]
                                     for t in texts], tok.pad_id)
    for text, p in zip(texts, probs, strict=True):
        [best] = classify(text)
        assert best["label"] == labels[int(p.argmax())], text
        assert abs(best["score"] - float(p.max())) <= TOL, (best, p)
    # every label's probability, texts batched (padded on the right)
    for text, p, got in zip(texts, probs, classify(texts, top_k=None, batch_size=len(texts)),
                            strict=True):
        scores = {d["label"]: d["score"] for d in got}
        assert max(abs(scores[label] - float(q)) for label, q in zip(labels, p, strict=True)
                   ) <= TOL, text
    # a text longer than the context: cut as our fine-tuning cuts it, <classify> kept
    long = " ".join(CLEANED * 3)
    assert len(tok.encode(long)) > N_CTX
    [p] = our_probabilities(ours, [[tok.start_id, *tok.encode(long)[:N_CTX - 2],
                                    tok.classify_id]], tok.pad_id)
    [best] = classify(long, truncation=True)
    assert best["label"] == labels[int(p.argmax())]
    assert abs(best["score"] - float(p.max())) <= TOL


def test_pipeline_reads_an_entailment_pair(tmp_path: Path, tokenizer: Path) -> None:
    ours, tok, labels, classify = exported_pipeline(tmp_path, tokenizer, "entailment")
    pairs = [(CLEANED[1], CLEANED[2]), (CLEANED[2], CLEANED[1]), *pairwise(SHORT)]
    probs = our_probabilities(ours, [[tok.start_id, *tok.encode(a), tok.delim_id,
                                      *tok.encode(b), tok.classify_id] for a, b in pairs],
                              tok.pad_id)
    assert len(set(probs.argmax(-1).tolist())) > 1  # not one label for everything
    for (premise, hypothesis), p in zip(pairs, probs, strict=True):
        got = classify({"text": premise, "text_pair": hypothesis}, top_k=None)
        scores = {d["label"]: d["score"] for d in got}
        assert got[0]["label"] == labels[int(p.argmax())]
        assert max(abs(scores[label] - float(q)) for label, q in zip(labels, p, strict=True)
                   ) <= TOL, (premise, hypothesis)


def zero_beta(model: TaskModel) -> None:
    model.trunk.h[-1].ln_2.bias.zero_()


def near_zero_sum(model: TaskModel) -> None:
    """Shift the last LayerNorm's bias so that sum(beta/gamma) is 0 but for float32 rounding."""
    norm = model.trunk.h[-1].ln_2
    norm.bias.sub_(norm.weight * (norm.bias / norm.weight).sum() / norm.weight.numel())


@pytest.mark.parametrize(("edit", "expected"), [
    (zero_beta, "the last LayerNorm's sum(beta/gamma) is 0, which the fold divides by"),
    (near_zero_sum, "the folded head's logits differ from ours by up to "),
])
def test_cli_refuses_a_bias_that_does_not_fold(tmp_path: Path, tokenizer: Path,
                                               edit: Callable[[TaskModel], None],
                                               expected: str) -> None:
    finetuned(tmp_path / "ft", tokenizer, "classification", edit)
    before = snapshot(tmp_path)
    code, output = invoke("export-hf", "--model", tmp_path / "ft", "--out", tmp_path / "hf")
    assert code == 2 and output.startswith(
        f"error: {tmp_path / 'ft'}: task 'tiny_classification' is a classification model whose "
        "head's bias does not fold into OpenAIGPTForSequenceClassification's bias-free score: "
        + expected), output
    assert output.count("\n") == 1 and "sum(beta/gamma)" in output, output
    print(f"\n{edit.__name__}: {output.strip()}")
    assert snapshot(tmp_path) == before  # nothing written, no temporaries


def test_multiple_choice_exports_as_double_heads_model(tmp_path: Path, tokenizer: Path) -> None:
    ours = finetuned(tmp_path / "ft", tokenizer, "multiple_choice")
    export_hf(tmp_path / "ft", tmp_path / "hf")
    assert sorted(p.name for p in (tmp_path / "hf").iterdir()) == [
        "config.json", "model.safetensors", "task.json", "tokenizer.json", "tokenizer_config.json"]
    assert (tmp_path / "hf" / "task.json").read_bytes() == (tmp_path / "ft" / "task.json"
                                                             ).read_bytes()

    hf, info = OpenAIGPTDoubleHeadsModel.from_pretrained(tmp_path / "hf",
                                                         output_loading_info=True)
    hf.eval()
    assert not any(info.values()), info  # no missing, unexpected or mismatched weights
    assert hf.lm_head.weight.data_ptr() == hf.transformer.tokens_embed.weight.data_ptr()
    summary = hf.multiple_choice_head
    assert (summary.summary_type, summary.summary.out_features) == ("cls_index", 1)
    assert summary.summary.bias is not None and isinstance(summary.activation, torch.nn.Identity)
    assert summary.first_dropout.p == 0.1
    assert hf.config.pad_token_id == GPT1Tokenizer.load(tokenizer).pad_id

    tok = GPT1Tokenizer.load(tokenizer)
    examples, choices = 3, 4
    ids, lengths = choice_batch(tok, examples, choices)
    with torch.no_grad():
        real = (ids != tok.pad_id).flatten(0, 1)
        # OpenAIGPTModel flattens (B, m, T) ids to rows, but not the attention mask
        out = hf(input_ids=ids, attention_mask=real.long(),
                 mc_token_ids=lengths - 1)  # the <classify> positions
        mine, hidden = ours(ids.flatten(0, 1), lengths.flatten(), choices)
        lm_logits = ours.trunk.lm_logits(hidden)
    assert out.mc_logits.shape == (examples, choices)
    assert max_diff(mine, out.mc_logits, "multiple choice ours->HF") <= TOL
    # at the real tokens: the mask makes padding attend differently
    assert max_diff(lm_logits[real], out.logits.flatten(0, 1)[real], "double heads LM") <= TOL


@pytest.mark.parametrize("source", ["pretrained", "multiple_choice", "classification"])
def test_exported_tokenizer_gives_our_ids(tmp_path: Path, tokenizer: Path, source: str) -> None:
    before = tokenizer.read_bytes()
    if source == "pretrained":
        (tmp_path / "model").mkdir()
        save_model(GPT1(GPT1Config(vocab_size=64, n_ctx=N_CTX, n_embd=8, n_layer=1,
                                   n_head=1)), tmp_path / "model")
        (tmp_path / "model" / "tokenizer.json").write_bytes(before)
    else:
        finetuned(tmp_path / "model", tokenizer, source)
    export_hf(tmp_path / "model", tmp_path / "hf")
    assert tokenizer.read_bytes() == before

    ours, theirs = GPT1Tokenizer.load(tokenizer), AutoTokenizer.from_pretrained(tmp_path / "hf")
    # a classification export lays texts out as the family does where special tokens are added
    # (transformers' default); the others add none
    templated = source == "classification"
    for text in CLEANED:
        assert theirs(text, add_special_tokens=False)["input_ids"] == ours.encode(text), text
        assert theirs(text)["input_ids"] == ([ours.start_id, *ours.encode(text),
                                              ours.classify_id] if templated
                                             else ours.encode(text)), text
    assert (GPT1Tokenizer.load(tmp_path / "hf" / "tokenizer.json").encode(CLEANED[0])
            == ours.encode(CLEANED[0]))
    specials = (theirs.unk_token_id, theirs.bos_token_id, theirs.sep_token_id,
                theirs.cls_token_id, theirs.pad_token_id)
    assert specials == (ours.unk_id, ours.start_id, ours.delim_id, ours.classify_id, ours.pad_id)
    layout = [ours.start_id, *ours.encode("a good film"), ours.delim_id,
              *ours.encode("i liked it"), ours.classify_id]
    assert theirs("<start> a good film <delim> i liked it <classify>",
                  add_special_tokens=False)["input_ids"] == layout
    if templated:
        assert theirs("a good film", "i liked it")["input_ids"] == layout
    else:
        assert (json.loads((tmp_path / "hf" / "tokenizer.json").read_bytes())
                == json.loads(before))
    assert theirs.model_max_length == N_CTX


def test_cli_refuses_similarity(tmp_path: Path, tokenizer: Path) -> None:
    finetuned(tmp_path / "ft", tokenizer, "similarity")
    before = snapshot(tmp_path)
    code, output = invoke("export-hf", "--model", tmp_path / "ft", "--out", tmp_path / "hf")
    assert code == 2 and output.startswith(f"error: {tmp_path / 'ft'}: task 'tiny_similarity' "
                                           "is a similarity model, which no transformers class "
                                           "computes: its head adds the <classify> states of "
                                           "both orders"), output
    assert output.count("\n") == 1, output
    assert snapshot(tmp_path) == before  # nothing written, no temporaries
