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


def test_resumed_run_counts_eta_from_its_own_rate(caplog: pytest.LogCaptureFixture,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter([0.0, 0.0, 10.0])  # started at 0 (init, enter); 10 s after the first update
    monkeypatch.setattr("gpt1.progress.time.perf_counter", lambda: next(clock))
    with caplog.at_level(logging.INFO, logger="test.progress"), \
            StepProgress("pretrain", 100, 10, log, start=50) as progress:
        progress.update(60, loss=1.0)  # 10 steps in 10 s; 40 to go
    assert _lines(caplog) == ["pretrain 60/100 loss 1 eta 0:00:40"]
