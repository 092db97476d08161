"""Stage `code`: a fingerprint of the code each stage's driver runs (`gpt1.jobs.code`), one file
per driver in artifacts/code/, which that driver's stages depend on in place of its modules."""

from __future__ import annotations

import re
from pathlib import Path

from gpt1.config import Params
from gpt1.jobs.code import fingerprint_drivers
from tasks.paths import CODE_DIR
from tasks.stage import main

DRIVER = re.compile(r"python -m tasks\.(\w+)")  # a stage's command in dvc.yaml


def run(params: Params) -> None:
    del params  # the code's fingerprints depend on no knob
    drivers = set(DRIVER.findall(Path("dvc.yaml").read_text(encoding="utf-8"))) - {"code"}
    fingerprint_drivers(Path.cwd(), sorted(drivers), CODE_DIR)


if __name__ == "__main__":
    main("code", run)
