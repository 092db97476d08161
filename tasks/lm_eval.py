"""Stage `lm_eval`: the pretrained model's loss on text kept out of pretraining, per token and per
word, beside its validation loss and the unigram baseline (`gpt1.training.heldout`); and a short
text it writes from `lm_eval.sample`'s prompt (seeded, `gpt1.model.generate`), for the report."""

from __future__ import annotations

import json
import logging

from gpt1.atomic import atomic_dir
from gpt1.config import Params
from gpt1.corpus.bpe import GPT1Tokenizer
from gpt1.model.generate import sample_text
from gpt1.model.registry import load_model
from gpt1.records import record_not_run, write_record
from gpt1.training.device import placement
from gpt1.training.heldout import heldout_files, heldout_metrics
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


def run(params: Params) -> None:
    files = heldout_files(params)  # checked first: bad params write nothing
    tokenizer = GPT1Tokenizer.load(PRETRAIN_DIR / "tokenizer.json")
    place = placement(params.pretrain.device, params.pretrain.precision)
    model = load_model(PRETRAIN_DIR).to(place.device)
    generated = {"model": PRETRAIN_DIR.as_posix(),
                 **sample_text(model, tokenizer, params.lm_eval.sample)}
    log.info("the model writes: %s|%s", generated["prompt_as_read"], generated["continuation"])
    # every input read (the shards' manifest, pretrain's metrics) before anything is written
    metrics = (heldout_metrics(params, files, model, tokenizer, place, SHARDS_DIR,
                               PRETRAIN_METRICS) if files else None)
    with atomic_dir(LM_EVAL_DIR) as tmp:
        (tmp / GENERATED.name).write_text(json.dumps(generated, indent=2) + "\n",
                                          encoding="utf-8")
    if metrics is None:
        reason = "no held-out text named (lm_eval.files)"
        record_not_run(reason, metrics=LM_EVAL_METRICS)
        log.info("nothing scored: %s", reason)
        return
    write_record(LM_EVAL_METRICS, metrics)
    log.info("held-out loss %.4f nats/token (%.4f per word); val %s, token frequencies alone: "
             "%s", metrics["all"]["loss"], metrics["all"]["word_loss"], metrics["val_loss"],
             metrics["all"]["unigram_loss"])


if __name__ == "__main__":
    main("lm_eval", run)
