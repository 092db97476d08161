"""The command-line shell every stage shares: parse `--params`, set up logging, report errors."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Callable

from gpt1.config import Params, ParamsError, load_params

log = logging.getLogger("gpt1")


def main(name: str, run: Callable[..., None], argv: list[str] | None = None,
         extra: Callable[[argparse.ArgumentParser], None] | None = None) -> None:
    """Run stage `name`: `run(params, **extra_args)`; expected failures exit 2 with one message."""
    parser = argparse.ArgumentParser(prog=f"python -m tasks.{name}")
    parser.add_argument("--params", default="params.yaml", help="the params file to read")
    if extra is not None:
        extra(parser)
    args = vars(parser.parse_args(argv))
    # under torchrun (RANK set), rank 0 speaks for all: the others report warnings and errors
    main_process = os.environ.get("RANK", "0") == "0"
    logging.basicConfig(level=logging.INFO if main_process else logging.WARNING,
                        format="%(asctime)s %(name)s %(message)s", datefmt="%H:%M:%S",
                        stream=sys.stderr)
    started = time.perf_counter()
    try:
        params: Params = load_params(args.pop("params"))
        run(params, **args)
    except (ParamsError, FileNotFoundError, ValueError) as err:  # bad input, not a bug
        log.error("stage %s failed: %s", name, err)
        sys.exit(2)
    log.info("stage %s done in %.1fs", name, time.perf_counter() - started)
