"""Stage `report`: `reports/summary.md` from the pretraining and fine-tuning metrics."""

from __future__ import annotations

import json
import logging

from gpt1.atomic import write_text
from gpt1.config import Params
from gpt1.report import render_summary
from tasks.paths import FINETUNE_METRICS, PRETRAIN_METRICS, REPORT
from tasks.stage import main

log = logging.getLogger("gpt1.report")


def run(params: Params) -> None:
    pretrain = json.loads(PRETRAIN_METRICS.read_text())
    finetune = {}
    for task in params.finetune.tasks:
        path = FINETUNE_METRICS / f"{task}.json"
        if not path.is_file():
            raise FileNotFoundError(f"{path}: not found (run finetune@{task} first)")
        finetune[task] = json.loads(path.read_text())
    write_text(REPORT, render_summary(pretrain, finetune))
    log.info("report written to %s", REPORT)


if __name__ == "__main__":
    main("report", run)
