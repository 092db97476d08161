"""Progress of long loops: a live bar in a terminal, periodic log lines elsewhere (CI, files)."""

from __future__ import annotations

import datetime
import logging
import math
import sys
import time
from types import TracebackType

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn


class StepProgress:
    """Report `update(step, **fields)` calls as a bar (TTY), or as a log line each time `step`
    passes a multiple of `log_every` (steps may jump by more than one).

    The ETA is at the rate since the first update: the first step's time (where `torch.compile`
    compiles the step, and memory is first allocated) says little about the others'."""

    def __init__(self, description: str, total: int, log_every: int,
                 logger: logging.Logger, start: int = 0) -> None:
        self.description, self.total, self.log_every, self.logger = (
            description, total, log_every, logger)
        self.start = start  # steps done before this process (a resumed run)
        self._bar: Progress | None = None
        self._task = None
        self._first: tuple[int, float] | None = None  # the first update's step and time
        self._logged = start  # the step of the last log line

    def __enter__(self) -> StepProgress:
        if sys.stderr.isatty():
            self._bar = Progress(TextColumn("{task.description}"), BarColumn(),
                                 MofNCompleteColumn(), TimeRemainingColumn(),
                                 TextColumn("{task.fields[info]}"), transient=False)
            self._bar.start()
            self._task = self._bar.add_task(self.description, total=self.total,
                                            completed=self.start, info="")
        return self

    def update(self, step: int, **fields: float) -> None:
        """`step` steps are done; `fields` (loss, lr, ...) describe the latest one."""
        info = " ".join(f"{k} {v:.4g}" for k, v in fields.items())
        now = time.perf_counter()
        if self._first is None:
            self._first = (step, now)
        first_step, first_time = self._first
        eta = ((now - first_time) / (step - first_step) * (self.total - step)
               if step > first_step else float("nan"))
        if self._bar is not None:
            self._bar.update(self._task, completed=step, info=info)
        elif step // self.log_every > self._logged // self.log_every or step == self.total:
            self._logged = step
            self.logger.info("%s %d/%d %s eta %s", self.description, step, self.total, info,
                             _duration(eta))

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._bar is not None:
            self._bar.stop()


def _duration(seconds: float) -> str:
    """`1:02:03` for an ETA (`?` before there is a rate to estimate it from)."""
    if math.isnan(seconds):
        return "?"
    return str(datetime.timedelta(seconds=round(seconds)))
