"""Stage `lm_eval`: the pretrained model's held-out loss and a text it writes
(`gpt1.jobs.lm_eval`); without held-out text named, a record of why not."""

from __future__ import annotations

import logging

from gpt1.config import Params
from gpt1.jobs.lm_eval import lm_eval
from gpt1.records import record_not_run, write_record
from tasks.paths import GENERATED, LM_EVAL_METRICS, PRETRAIN_DIR, PRETRAIN_METRICS, SHARDS_DIR
from tasks.stage import main

log = logging.getLogger("tasks.lm_eval")  # run as __main__: named by its module path


def run(params: Params) -> None:
    metrics = lm_eval(params, PRETRAIN_DIR, SHARDS_DIR, PRETRAIN_METRICS, GENERATED)
    if metrics is None:
        reason = "no held-out text named (lm_eval.files)"
        record_not_run(reason, metrics=LM_EVAL_METRICS)
        log.info("nothing scored: %s", reason)
        return
    write_record(LM_EVAL_METRICS, metrics)


if __name__ == "__main__":
    main("lm_eval", run)
