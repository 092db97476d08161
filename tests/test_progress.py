"""gpt1.progress: log lines (no terminal) with the fields, the step and an ETA."""

from __future__ import annotations

import logging

import pytest

from gpt1.progress import StepProgress

log = logging.getLogger("test.progress")


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "test.progress"]


def test_logs_every_n_steps_and_the_last(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="test.progress"), \
            StepProgress("pretrain", 10, 4, log) as progress:
        for step in range(1, 11):
            progress.update(step, loss=2.5, tok_s=1000.0, **{"mfu%": 12.5})
    lines = _lines(caplog)
    assert [line.split()[1] for line in lines] == ["4/10", "8/10", "10/10"]
    assert lines[0].startswith("pretrain 4/10 loss 2.5 tok_s 1000 mfu% 12.5 eta ")
    assert lines[-1].endswith("eta 0:00:00")


def test_eta_is_at_the_rate_after_the_first_step(caplog: pytest.LogCaptureFixture,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # a resumed run (from step 50) whose first step compiled for 30 s; then 9 steps in 9 s
    clock = iter([30.0, 39.0])
    monkeypatch.setattr("gpt1.progress.time.perf_counter", lambda: next(clock))
    with caplog.at_level(logging.INFO, logger="test.progress"), \
            StepProgress("pretrain", 100, 10, log, start=50) as progress:
        progress.update(51, loss=1.0)
        progress.update(60, loss=1.0)  # 1 step a second; 40 to go
    assert _lines(caplog) == ["pretrain 60/100 loss 1 eta 0:00:40"]


def test_no_eta_before_a_step_after_the_first(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="test.progress"), \
            StepProgress("finetune", 10, 1, log) as progress:
        progress.update(1, loss=1.0)
    assert _lines(caplog) == ["finetune 1/10 loss 1 eta ?"]
