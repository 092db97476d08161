"""A language model's loss on held-out text (issue 13's held-out evaluation): every token of a
stream predicted once, from the tokens before it in its window of `n_ctx`, in nats per token and
per word, so that models with different vocabularies compare; and the files of `lm_eval.files`
scored so, beside the unigram baseline of the text the model was pretrained on."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from gpt1.config import Params
from gpt1.corpus.books import corpus_files, read_book, split_documents
from gpt1.corpus.shards import cross_entropy, read_verified_split, unigram_log_probs
from gpt1.corpus.text import TextCleaner
from gpt1.corpus.tokenizer import GPT1Tokenizer
from gpt1.errors import InputError
from gpt1.model.trunk import Trunk
from gpt1.records import PretrainLosses, TrainManifest, read_record
from gpt1.training.device import Placement, autocast

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TextLoss:
    nats: float  # summed over the predicted tokens
    tokens: int  # tokens predicted: all but the first
    words: int  # words of the text the tokens encode

    @property
    def per_token(self) -> float:
        return self.nats / self.tokens

    @property
    def per_word(self) -> float:
        return self.nats / self.words

    @property
    def perplexity(self) -> float:
        return math.exp(self.per_token)

    @property
    def word_perplexity(self) -> float:
        return math.exp(self.per_word)


@torch.no_grad()
def text_loss(model: Trunk, ids: np.ndarray, words: int, batch_size: int,
              placement: Placement) -> TextLoss:
    """The loss of `model` on the token stream `ids` (the encoding of a text of `words` words),
    read in consecutive windows of `n_ctx` + 1 tokens that overlap by one: each window's first
    token is the previous one's last, so every token but the stream's first is predicted once,
    the context starting afresh at each window."""
    if len(ids) < 2 or words < 1:
        raise InputError(f"held-out text of {len(ids)} tokens and {words} words: a loss needs "
                         "two tokens and a word at least")
    was_training = model.training
    model.eval()
    n_ctx = model.config.n_ctx
    starts = range(0, len(ids) - 1, n_ctx)
    windows = [torch.from_numpy(ids[s:s + n_ctx + 1].astype(np.int64)) for s in starts]
    sums = []  # each batch's, on the device: read together at the end
    for i in range(0, len(windows), batch_size):
        batch = windows[i:i + batch_size]
        same_length = [w for w in batch if len(w) == len(batch[0])]
        for group in (same_length, batch[len(same_length):]):  # only the last window is shorter
            if group:
                tokens = torch.stack(group).to(placement.device)
                with autocast(placement.device, placement.dtype):
                    logits = model.lm_logits(model(tokens[:, :-1]))
                sums.append(F.cross_entropy(logits.float().flatten(0, 1),
                                            tokens[:, 1:].flatten(), reduction="sum"))
    model.train(was_training)
    return TextLoss(nats=sum(torch.stack(sums).tolist()), tokens=len(ids) - 1, words=words)


def heldout_files(params: Params) -> list[Path]:
    """The files `lm_eval.files` names (none where it names none); InputError for one that
    pretraining reads too."""
    if not params.lm_eval.files:
        return []
    root = Path(params.ingest.root)
    files = corpus_files(root, params.lm_eval.files, "lm_eval.files")
    pretraining = set(corpus_files(root, params.ingest.corpus, "ingest.corpus"))
    if shared := [f.relative_to(root).as_posix() for f in files if f in pretraining]:
        raise InputError(f"lm_eval.files: {shared} are pretraining text (ingest.corpus): "
                         "held-out text must be kept out of it")
    return files


def clean_text(path: Path, params: Params, cleaner: TextCleaner) -> list[str]:
    """A file's documents as the corpus stages make them: split as ingest splits books, cleaned
    as clean cleans them, the too-short ones dropped."""
    docs = (cleaner(doc) for doc in split_documents(read_book(path), params.ingest.doc_chars))
    return [doc for doc in docs if len(doc) >= params.clean.min_chars]


def figures(loss: TextLoss, unigram: float | None) -> dict[str, Any]:
    """What the metrics file says of a text's loss (and of its unigram baseline's, where
    known)."""
    return {"tokens": loss.tokens, "words": loss.words, "loss": round(loss.per_token, 4),
            "perplexity": round(loss.perplexity, 2), "word_loss": round(loss.per_word, 4),
            "word_perplexity": round(loss.word_perplexity, 2),
            "unigram_loss": None if unigram is None else round(unigram, 4)}


def train_unigram(shards_dir: Path, vocab_size: int) -> np.ndarray:
    """The log-frequencies of the tokens of the train shards in `shards_dir`, verified against
    its manifest (stage `tokenize`'s)."""
    manifest = read_record(shards_dir / "manifest.json", "tokenize", TrainManifest)
    train = read_verified_split(shards_dir / "train", manifest["splits"]["train"]["shards"])
    return unigram_log_probs(train, vocab_size)


def heldout_metrics(params: Params, files: list[Path], model: Trunk, tokenizer: GPT1Tokenizer,
                    place: Placement, shards_dir: Path, pretrain_metrics: Path
                    ) -> dict[str, Any]:
    """The loss of `model` on each of `files` (`heldout_files`) and on all of them, with the
    unigram baseline's where the model was pretrained here (on the shards in `shards_dir`),
    beside the validation losses of pretraining's metrics file (`pretrain_metrics`): the
    metrics file of stage `lm_eval`."""
    # the unigram baseline is the frequencies of the text the model was pretrained on, which
    # only a model pretrained here has in the shards
    unigram = (None if params.pretrain.released
               else train_unigram(shards_dir, tokenizer.vocab_size))
    cleaner = TextCleaner()
    root, scored, streams, losses = Path(params.ingest.root), {}, [], []
    for path in files:
        docs = clean_text(path, params, cleaner)
        ids = np.concatenate([np.zeros(0, np.int64),
                              *(np.asarray(d, np.int64) for d in tokenizer.encode_batch(docs))])
        words = sum(len(doc.split()) for doc in docs)
        source = path.relative_to(root).as_posix()
        try:
            loss = text_loss(model, ids, words, params.lm_eval.batch_size, place)
        except InputError as err:
            raise InputError(f"{path}: {err}") from None
        scored[source] = figures(loss, None if unigram is None else cross_entropy(unigram, [ids]))
        streams.append(ids)
        losses.append(loss)
        log.info("%s: %s", source, scored[source])
    total = TextLoss(sum(loss.nats for loss in losses), sum(loss.tokens for loss in losses),
                     sum(loss.words for loss in losses))
    pretrained = read_record(pretrain_metrics, "pretrain", PretrainLosses)
    return {"run": True, "files": scored,
            "all": figures(total, None if unigram is None else cross_entropy(unigram, streams)),
            "val_loss": pretrained.get("val_loss"),  # none for an imported model
            "unigram_val_loss": pretrained.get("unigram_val_loss")}
