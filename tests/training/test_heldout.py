"""gpt1.training.heldout: every held-out token predicted once, in windows of n_ctx, per token and
per word; the files of lm_eval.files chosen, cleaned as the corpus is and scored beside the
unigram baseline and pretraining's losses."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from gpt1.config import Params, parse_params, read_yaml
from gpt1.corpus.shards import ShardWriter, cross_entropy, unigram_log_probs
from gpt1.corpus.text import TextCleaner
from gpt1.corpus.tokenizer import GPT1Tokenizer, train_bpe
from gpt1.errors import InputError
from gpt1.model.transformer import GPT1, GPT1Config
from gpt1.training.device import placement
from gpt1.training.heldout import (
    clean_text,
    figures,
    heldout_files,
    heldout_metrics,
    text_loss,
)
from tests.conftest import REPO

CPU = placement("cpu", "fp32")


def _model() -> GPT1:
    torch.manual_seed(0)
    return GPT1(GPT1Config(vocab_size=20, n_ctx=8, n_embd=16, n_layer=2, n_head=2))


@pytest.mark.parametrize("length", [2, 9, 17, 30])  # one window; exactly full; and a short last
def test_the_loss_sums_each_windows_predictions(length: int) -> None:
    model = _model().eval()  # the reference below must not drop out either
    ids = np.random.default_rng(0).integers(0, 20, size=length).astype(np.uint16)
    result = text_loss(model, ids, words=5, batch_size=2, placement=CPU)
    expected, predicted = 0.0, 0
    for start in range(0, length - 1, 8):  # windows of 9 tokens overlapping by one
        window = torch.tensor(ids[start:start + 9].astype(np.int64))[None]
        logits = model.lm_logits(model(window[:, :-1]))[0]
        expected += F.cross_entropy(logits, window[0, 1:], reduction="sum").item()
        predicted += window.shape[1] - 1
    assert result.tokens == predicted == length - 1
    assert result.nats == pytest.approx(expected, rel=1e-5)
    assert result.per_token == pytest.approx(expected / (length - 1), rel=1e-5)
    assert result.per_word == pytest.approx(expected / 5, rel=1e-5)
    assert result.word_perplexity == pytest.approx(math.exp(expected / 5), rel=1e-5)


def test_the_loss_is_read_from_the_device_once(device_reads: list[str]) -> None:
    """Four windows in batches of two, the last shorter: one read at the end, not one per batch
    (each a wait for a GPU)."""
    ids = np.random.default_rng(0).integers(0, 20, size=30).astype(np.uint16)
    text_loss(_model().eval(), ids, words=5, batch_size=2, placement=CPU)
    assert device_reads == ["tolist"]


def test_an_untrained_model_is_near_chance_and_its_mode_is_kept() -> None:
    model = _model().train()
    ids = np.arange(200, dtype=np.uint16) % 20
    result = text_loss(model, ids, words=100, batch_size=4, placement=CPU)
    assert abs(result.per_token - math.log(20)) < 0.5  # N(0, 0.02) weights: near uniform
    assert model.training


def test_too_short_a_text_is_refused() -> None:
    with pytest.raises(ValueError, match="a loss needs two tokens and a word"):
        text_loss(_model(), np.array([3], dtype=np.uint16), words=1, batch_size=1, placement=CPU)


# -- the held-out files of lm_eval.files, scored -----------------------------------------------

STORY = ("The lantern burned low while the ferryman counted the boats that had not come home. "
         "Nobody on the quay said a word about the storm, and the water stayed dark until dawn.")


def _params(root: Path, *, files: list[str], source: str = "train", **ingest: object) -> Params:
    raw = read_yaml((REPO / "params.yaml").read_text(encoding="utf-8"))
    raw["ingest"].update({"root": str(root), "corpus": ["books/train_*.txt"], **ingest})
    raw["clean"]["min_chars"] = 40
    raw["lm_eval"].update({"files": files, "batch_size": 2})
    if source != "train":
        raw["pretrain"].update({"source": source, "source_dir": "../released"})
    return parse_params(raw)


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    """A data root with two books pretraining reads and two kept out of it."""
    books = tmp_path / "root" / "books"
    books.mkdir(parents=True)
    for name in ("train_1", "train_2", "kept_a", "kept_b"):
        (books / f"{name}.txt").write_text(f"{STORY}\n\n{STORY.upper()}\n\nThe end.\n")
    return tmp_path / "root"


def test_no_held_out_file_named_reads_nothing(tmp_path: Path) -> None:
    assert heldout_files(_params(tmp_path / "absent", files=[])) == []


def test_the_named_files_sorted_once_each(root: Path) -> None:
    params = _params(root, files=["books/kept_b.txt", "books/kept_*.txt"])
    assert heldout_files(params) == [root / "books/kept_a.txt", root / "books/kept_b.txt"]


def test_pretraining_text_is_refused_as_held_out(root: Path) -> None:
    params = _params(root, files=["books/kept_a.txt", "books/train_2.txt"])
    with pytest.raises(InputError, match=r"^lm_eval\.files: \['books/train_2\.txt'\] are "
                                         r"pretraining text \(ingest\.corpus\): held-out text "
                                         r"must be kept out of it$"):
        heldout_files(params)


def test_a_file_is_cleaned_into_the_corpus_documents_too_short_ones_dropped(root: Path) -> None:
    params = _params(root, files=[], doc_chars=200)  # two paragraphs, then "The end." alone
    docs = clean_text(root / "books/kept_a.txt", params, TextCleaner())
    assert docs == [TextCleaner()(f"{STORY}\n{STORY.upper()}")]


def _tokenizer() -> GPT1Tokenizer:
    return GPT1Tokenizer(train_bpe([TextCleaner()(STORY)] * 20, 120, 2))


def _shards(folder: Path, ids: np.ndarray) -> None:
    writer = ShardWriter(folder / "train", np.dtype(np.uint16), shard_tokens=50)
    writer.append(ids)
    listed = [vars(shard) for shard in writer.close()]
    (folder / "manifest.json").write_text(json.dumps({"splits": {"train": {"shards": listed}}}))


@pytest.mark.parametrize("source", ["train", "openai"])
def test_each_file_and_all_of_them_scored_beside_pretrainings_losses(root: Path, tmp_path: Path,
                                                                     source: str) -> None:
    params = _params(root, files=["books/kept_*.txt"], source=source, doc_chars=150)
    files, tok = heldout_files(params), _tokenizer()
    model = GPT1(GPT1Config(vocab_size=tok.vocab_size, n_ctx=8, n_embd=16, n_layer=1, n_head=2))
    train = np.arange(120, dtype=np.uint16) % tok.vocab_size
    _shards(tmp_path / "shards", train)
    (tmp_path / "pretrain.json").write_text(json.dumps({"val_loss": 4.5,
                                                        "unigram_val_loss": 4.75}))
    metrics = heldout_metrics(params, files, model, tok, CPU, tmp_path / "shards",
                              tmp_path / "pretrain.json")
    assert list(metrics) == ["run", "files", "all", "val_loss", "unigram_val_loss"]
    assert metrics["run"] and (metrics["val_loss"], metrics["unigram_val_loss"]) == (4.5, 4.75)
    assert list(metrics["files"]) == ["books/kept_a.txt", "books/kept_b.txt"]
    docs = clean_text(files[0], params, TextCleaner())
    ids = np.concatenate([np.asarray(d, np.int64) for d in tok.encode_batch(docs)])
    loss = text_loss(model, ids, sum(len(d.split()) for d in docs), 2, CPU)
    unigram = (None if source == "openai"
               else cross_entropy(unigram_log_probs([train], tok.vocab_size), [ids]))
    assert metrics["files"]["books/kept_a.txt"] == figures(loss, unigram)
    assert list(figures(loss, unigram)) == ["tokens", "words", "loss", "perplexity", "word_loss",
                                            "word_perplexity", "unigram_loss"]
    both = metrics["all"]  # the two files are the same text: the same loss per token and word
    assert (both["tokens"], both["words"]) == (2 * loss.tokens, 2 * loss.words)
    assert both["loss"] == pytest.approx(round(loss.per_token, 4), abs=2e-4)
    assert (both["unigram_loss"] is None) == (source == "openai")


def test_damaged_records_name_the_stage_that_writes_them(root: Path, tmp_path: Path) -> None:
    params = _params(root, files=["books/kept_a.txt"], doc_chars=150)
    tok = _tokenizer()
    model = GPT1(GPT1Config(vocab_size=tok.vocab_size, n_ctx=8, n_embd=16, n_layer=1, n_head=2))
    shards = tmp_path / "shards"
    shards.mkdir()
    (shards / "manifest.json").write_text('{"splits": ')
    with pytest.raises(InputError, match=r"manifest\.json: damaged, not the JSON stage tokenize "
                                         r"writes"):
        heldout_metrics(params, heldout_files(params), model, tok, CPU, shards,
                        tmp_path / "pretrain.json")
    _shards(shards, np.arange(60, dtype=np.uint16) % tok.vocab_size)
    (tmp_path / "pretrain.json").write_text("")
    with pytest.raises(InputError, match=r"pretrain\.json: damaged, not the JSON stage pretrain "
                                         r"writes"):
        heldout_metrics(params, heldout_files(params), model, tok, CPU, shards,
                        tmp_path / "pretrain.json")


def test_a_file_too_short_to_score_is_named(root: Path, tmp_path: Path) -> None:
    (root / "books/kept_a.txt").write_text("Too short.\n")
    params = _params(root, files=["books/kept_a.txt"], source="openai")
    tok = _tokenizer()
    model = GPT1(GPT1Config(vocab_size=tok.vocab_size, n_ctx=8, n_embd=16, n_layer=1, n_head=2))
    with pytest.raises(InputError, match=rf"^{root / 'books/kept_a.txt'}: held-out text of 0 "
                                         r"tokens and 0 words"):
        heldout_metrics(params, heldout_files(params), model, tok, CPU, tmp_path / "shards",
                        tmp_path / "pretrain.json")
