"""A stage's command as DVC runs it, in this process (in conftest's `stage_dir`)."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

from gpt1.config import Params
from tasks.stage import main


def run_stage(run: Callable[[Params], None], caplog: pytest.LogCaptureFixture) -> int:
    """`main` of a stage named pretrain running `run`: its exit code (0: it returned)."""
    with caplog.at_level(logging.INFO, logger="tasks.stage"), pytest.raises(SystemExit) as stopped:
        main("pretrain", run, argv=[])
        raise SystemExit(0)
    return int(stopped.value.code)
