"""Stages `pretrain` and `pretrain_control@lstm`: language-model pretraining on the token
shards, of GPT-1 and of the paper's recurrent control (`--trunk lstm`, Table 5), each with its
own outputs (`gpt1.jobs.pretrain` does the work)."""

from __future__ import annotations

import argparse
import contextlib
import logging
from collections.abc import Callable, Iterator
from pathlib import Path

from gpt1.config import Params
from gpt1.records import record_not_run, write_record
from tasks import paths
from tasks.stage import main

log = logging.getLogger("tasks.pretrain")  # run as __main__: named by its module path

# by trunk: the model, its checkpoints, its metrics file, its live logs
OUTPUTS = {"gpt1": (paths.PRETRAIN_DIR, paths.PRETRAIN_CHECKPOINTS, paths.PRETRAIN_METRICS,
                    paths.PRETRAIN_LIVE),
           "lstm": (paths.PRETRAIN_LSTM_DIR, paths.PRETRAIN_LSTM_CHECKPOINTS,
                    paths.PRETRAIN_LSTM_METRICS, paths.PRETRAIN_LSTM_LIVE)}


def not_run_reason(params: Params, trunk: str) -> str | None:
    """Why stage `trunk` has nothing to do on these params (None: it has)."""
    if trunk == "lstm" and params.pretrain.released:
        return (f"pretrain.source is {params.pretrain.source}: the LSTM control is pretrained "
                "only beside a Transformer pretrained here, on the same shards")
    if trunk == "lstm" and "lstm" not in params.analysis.ablation.variants:
        return "lstm is not in analysis.ablation.variants"
    return None


@contextlib.contextmanager
def dvclive_log(folder: Path) -> Iterator[Callable[[int, dict[str, float]], None]]:
    """The training curves into `folder` by dvclive, each as a plot."""
    from dvclive import Live

    with Live(dir=str(folder), save_dvc_exp=False, dvcyaml=None, report=None) as live:
        def log_metrics(step: int, values: dict[str, float]) -> None:
            live.step = step
            for name, value in values.items():
                live.log_metric(name, value, plot=True)

        yield log_metrics


def run(params: Params, trunk: str = "gpt1") -> None:
    model, checkpoints, metrics, live = OUTPUTS[trunk]
    reason = not_run_reason(params, trunk)
    if reason is not None:
        record_not_run(reason, folders=(model,), metrics=metrics)
        for folder in (live, checkpoints):  # the folders only training fills, there all the same
            folder.mkdir(parents=True, exist_ok=True)
        log.info("not run: %s", reason)
        return
    # imported only here: a stage with nothing to do answers without torch's seconds of import
    from gpt1.jobs.pretrain import PretrainOutputs, pretrain_job
    from gpt1.training.checkpoint import StopRequested

    outputs = PretrainOutputs(model, checkpoints, live, paths.PRETRAIN_SNAPSHOTS)
    try:
        result = pretrain_job(params, trunk, outputs, paths.SHARDS_DIR, paths.BPE_DIR, dvclive_log)
    except StopRequested as stop:  # after its checkpoint: the next run resumes from it
        raise SystemExit(128 + stop.signum) from None
    if result is not None:  # None: a process other than rank 0, which writes nothing
        write_record(metrics, result)


def _trunk_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trunk", choices=sorted(OUTPUTS), default="gpt1",
                        help="gpt1 (stage pretrain) or lstm (stage pretrain_control@lstm)")


if __name__ == "__main__":
    main("pretrain", run, extra=_trunk_arg)
