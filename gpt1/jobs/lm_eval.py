"""Stage `lm_eval`'s job: the pretrained model's loss on text kept out of pretraining, per token
and per word, beside its validation loss and the unigram baseline (`gpt1.training.heldout`); and
a short text it writes from `lm_eval.sample`'s prompt (seeded, `gpt1.model.generate`), for the
report."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from gpt1.atomic import atomic_dir
from gpt1.config import Params
from gpt1.model.generate import sample_text
from gpt1.model.registry import load_language_model
from gpt1.training.device import placement
from gpt1.training.heldout import heldout_files, heldout_metrics

log = logging.getLogger(__name__)


def lm_eval(params: Params, pretrained: Path, shards: Path, pretrain_metrics: Path,
            generated: Path) -> dict[str, Any] | None:
    """The model in `pretrained` writes from the sample prompt into `generated` (its folder
    replaced atomically), then scores the held-out files of `lm_eval.files` (`shards`' manifest
    and `pretrain_metrics` give the baselines beside it). Returns the metrics, or None when no
    held-out file is named. Bad params are found before anything is written."""
    files = heldout_files(params)
    place = placement(params.pretrain.device, params.pretrain.precision)
    lm = load_language_model(pretrained)
    model, tokenizer = lm.model.to(place.device), lm.tokenizer
    text = {"model": pretrained.as_posix(),
            **sample_text(model, tokenizer, params.lm_eval.sample)}
    log.info("the model writes: %s|%s", text["prompt_as_read"], text["continuation"])
    # every input read (the shards' manifest, pretrain's metrics) before anything is written
    metrics = (heldout_metrics(params, files, model, tokenizer, place, shards, pretrain_metrics)
               if files else None)
    with atomic_dir(generated.parent) as tmp:
        (tmp / generated.name).write_text(json.dumps(text, indent=2) + "\n", encoding="utf-8")
    if metrics is not None:
        log.info("held-out loss %.4f nats/token (%.4f per word); val %s, token frequencies "
                 "alone: %s", metrics["all"]["loss"], metrics["all"]["word_loss"],
                 metrics["val_loss"], metrics["all"]["unigram_loss"])
    return metrics
