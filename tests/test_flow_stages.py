"""flows.stages: retries come from params.yaml, and bad input is never retried."""

from __future__ import annotations

from prefect.states import Failed

from flows.stages import StageFailed, _transient, stage_runner
from gpt1.config import FlowsParams, ServerParams


def test_retries_come_from_params() -> None:
    flows = FlowsParams(retries=3, retry_delay_seconds=7, lock_timeout_seconds=0,
                        server=ServerParams(host="127.0.0.1", port=4200))
    runner = stage_runner(flows)
    assert (runner.retries, runner.retry_delay_seconds) == (3, 7)
    assert runner.retry_condition_fn is _transient


def test_only_transient_failures_are_retried() -> None:
    def failed(exc: Exception):
        return Failed(data=exc)

    assert _transient(None, None, failed(StageFailed("pretrain", 1)))
    assert _transient(None, None, failed(StageFailed("pretrain", 137)))  # killed (OOM, SIGKILL)
    assert _transient(None, None, failed(OSError("disk")))
    assert not _transient(None, None, failed(StageFailed("ingest", 2)))  # bad input or params
