"""Stage `lm_eval`: the pretrained model's loss on text kept out of pretraining, per token and per
word, beside its validation loss and the unigram baseline; and a short text it writes from
`lm_eval.sample`'s prompt (seeded), for the report."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np

from gpt1.atomic import atomic_dir, write_text
from gpt1.config import Params
from gpt1.corpus.books import corpus_files, read_book, split_documents
from gpt1.corpus.bpe import GPT1Tokenizer
from gpt1.corpus.shards import cross_entropy, read_verified_split, unigram_log_probs
from gpt1.corpus.text import TextCleaner
from gpt1.errors import InputError
from gpt1.model.generate import sample
from gpt1.model.registry import load_model
from gpt1.model.trunk import Trunk
from gpt1.training.device import placement
from gpt1.training.heldout import TextLoss, text_loss
from tasks.paths import (
    GENERATED,
    LM_EVAL_DIR,
    LM_EVAL_METRICS,
    PRETRAIN_DIR,
    PRETRAIN_METRICS,
    SHARDS_DIR,
)
from tasks.stage import main

log = logging.getLogger("tasks.lm_eval")  # run as __main__: named by its module path


def heldout_files(params: Params) -> list[Path]:
    """The files `lm_eval.files` names (none where it names none); ValueError for one that
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


def _figures(loss: TextLoss, unigram: float | None) -> dict[str, Any]:
    return {"tokens": loss.tokens, "words": loss.words, "loss": round(loss.per_token, 4),
            "perplexity": round(loss.perplexity, 2), "word_loss": round(loss.per_word, 4),
            "word_perplexity": round(loss.word_perplexity, 2),
            "unigram_loss": None if unigram is None else round(unigram, 4)}


def write_sample(params: Params, model: Trunk, tokenizer: GPT1Tokenizer) -> None:
    """`lm_eval.sample`'s prompt, cleaned as the corpus is, continued by the model (seeded) and
    written with the settings that made it to `artifacts/lm_eval/generated.json`."""
    cfg = params.lm_eval.sample
    prompt_ids = tokenizer.encode(TextCleaner()(cfg.prompt))
    try:
        new_ids = sample(model, prompt_ids, cfg.tokens, cfg.temperature, cfg.top_k, cfg.seed)
    except InputError as err:
        raise InputError(f"lm_eval.sample.prompt: {err}") from None
    record = {"model": PRETRAIN_DIR.as_posix(), **cfg.model_dump(),
              "prompt_as_read": tokenizer.decode(prompt_ids),
              "continuation": tokenizer.decode(new_ids)}
    with atomic_dir(LM_EVAL_DIR) as tmp:
        (tmp / GENERATED.name).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    log.info("the model writes: %s|%s", record["prompt_as_read"], record["continuation"])


def run(params: Params) -> None:
    files = heldout_files(params)  # checked first: bad params write nothing
    tokenizer = GPT1Tokenizer.load(PRETRAIN_DIR / "tokenizer.json")
    place = placement(params.pretrain.device, params.pretrain.precision)
    model = load_model(PRETRAIN_DIR).to(place.device)
    write_sample(params, model, tokenizer)
    if not files:
        reason = "no held-out text named (lm_eval.files)"
        write_text(LM_EVAL_METRICS, json.dumps({"run": False, "reason": reason}, indent=2) + "\n")
        log.info("nothing scored: %s", reason)
        return
    # the unigram baseline is the frequencies of the text the model was pretrained on, which
    # only a model pretrained here has in the shards
    unigram = None
    if not params.pretrain.released:
        manifest = json.loads((SHARDS_DIR / "manifest.json").read_text())
        train = read_verified_split(SHARDS_DIR / "train", manifest["splits"]["train"]["shards"])
        unigram = unigram_log_probs(train, tokenizer.vocab_size)
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
        scored[source] = _figures(loss, None if unigram is None else cross_entropy(unigram, [ids]))
        streams.append(ids)
        losses.append(loss)
        log.info("%s: %s", source, scored[source])
    total = TextLoss(sum(loss.nats for loss in losses), sum(loss.tokens for loss in losses),
                     sum(loss.words for loss in losses))
    pretrained = json.loads(PRETRAIN_METRICS.read_text())
    metrics = {"run": True, "files": scored,
               "all": _figures(total, None if unigram is None
                               else cross_entropy(unigram, streams)),
               "val_loss": pretrained.get("val_loss"),  # none for an imported model
               "unigram_val_loss": pretrained.get("unigram_val_loss")}
    write_text(LM_EVAL_METRICS, json.dumps(metrics, indent=2) + "\n")
    log.info("held-out loss %.4f nats/token (%.4f per word); val %s, token frequencies alone: "
             "%s", total.per_token, total.per_word, metrics["val_loss"],
             metrics["all"]["unigram_loss"])


if __name__ == "__main__":
    main("lm_eval", run)
