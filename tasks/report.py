"""Stage `report`: the run report from every stage's metrics file, the stage records, the
pretraining curves and the text the model wrote: `reports/index.html` (one self-contained page),
`reports/summary.md` (the same as markdown), `reports/headline.txt` (what `make pipeline` prints)
and the PNGs in `reports/plots/`."""

from __future__ import annotations

import logging
from pathlib import Path

from gpt1.config import Params
from gpt1.jobs.report import write_report
from gpt1.reporting.files import RunFiles
from tasks.paths import REPORT, REPORT_HEADLINE, REPORT_HTML, REPORT_PLOTS, RUN_FILES
from tasks.stage import checkout_commit, main

log = logging.getLogger("tasks.report")  # run as __main__: named by its module path


def run(params: Params) -> None:
    root = Path()  # the project: DVC runs stages there (DVC_ROOT may name another checkout)
    written = write_report(params, RunFiles(**RUN_FILES), root, checkout_commit(root),
                          summary=REPORT, page=REPORT_HTML, headline=REPORT_HEADLINE,
                          plots=REPORT_PLOTS)
    log.info("report written to %s and %s (%d plots)", REPORT_HTML, REPORT, len(written))


if __name__ == "__main__":
    main("report", run)
