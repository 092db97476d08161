"""The command-line shell every stage shares: parse `--params`, set up logging, report errors."""

from __future__ import annotations

import argparse
import datetime
import errno
import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from gpt1.atomic import atomic_dir, write_text
from gpt1.config import Params, ParamsError, load_params, read_yaml
from tasks.paths import STAGE_RECORDS

log = logging.getLogger(__name__)

# Failures retrying cannot mend: bad input or params, a loss gone non-finite, the disk or the
# permissions. They exit 2 with one line; anything else is a bug and keeps its traceback.
EXPECTED_FAILURES = (ParamsError, ValueError, FloatingPointError, OSError)
NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


STATUS_FILE = "status.json"  # in an output folder of a stage that had nothing to do: why


def write_not_run(folder: Path, reason: str) -> None:
    """Replace `folder` (an output dvc.yaml declares) with one holding only `status.json`, which
    says the stage did not run and why: the output exists, as DVC requires, and says so."""
    with atomic_dir(folder) as tmp:
        (tmp / STATUS_FILE).write_text(json.dumps({"run": False, "reason": reason}) + "\n")


def not_run_reason(folder: Path) -> str | None:
    """Why the stage that writes `folder` did not run (`write_not_run`), or None if it ran."""
    status = folder / STATUS_FILE
    if not status.is_file():
        return None
    recorded = json.loads(status.read_text())
    return None if recorded["run"] else recorded["reason"]


def describe(err: BaseException) -> str:
    """One line for an expected failure, naming the file where the error carries one."""
    if isinstance(err, OSError) and err.errno in NO_SPACE:
        where = f" writing {err.filename}" if err.filename else ""
        detail = "" if err.strerror == os.strerror(err.errno) else f" ({err.strerror})"
        return (f"no space left on device{where}{detail}: free some space and run the stage "
                "again")
    return str(err)


def declared_params(dvc_yaml: Path, address: str) -> list[str]:
    """The params keys dvc.yaml declares for the stage at `address` (`pretrain`,
    `finetune@sst2`): the values DVC records in dvc.lock once the stage succeeds."""
    name, _, key = address.partition("@")
    stage = read_yaml(dvc_yaml.read_text(encoding="utf-8"))["stages"].get(name)
    if stage is None:
        return []
    body = stage["do"] if "foreach" in stage else stage
    return [p.replace("${key}", key) for p in body.get("params", []) if isinstance(p, str)]


def read_values(params_path: Path, keys: list[str]) -> dict[str, object]:
    """`keys` (dotted) as params.yaml holds them now; a key that went missing reads None."""
    raw = read_yaml(params_path.read_text(encoding="utf-8"))
    values: dict[str, object] = {}
    for dotted in keys:
        node: object = raw
        for part in dotted.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        values[dotted] = node
    return values


def check_params_unchanged(params_path: Path, before: dict[str, object]) -> None:
    """Fail if a key the stage read changed while it ran: DVC reads params.yaml after the
    command ends, and would record the new value beside outputs made with the old one."""
    after = read_values(params_path, list(before))
    changed = [key for key in before if after[key] != before[key]]
    if changed:
        raise ParamsError(f"{params_path}: {', '.join(changed)} changed while the stage ran; its "
                          "outputs were made with the values it read at the start, so it fails "
                          "rather than let dvc.lock record the new ones: run it again")


def record_path(address: str) -> Path:
    """Where the record of the stage at `address` lies: `metrics/stages/<stage>.json`, or
    `metrics/stages/<stage>/<key>.json` for one of a foreach or matrix stage (`finetune@sst2`),
    so that the report can depend on each group's folder (dvc.yaml declares the same paths)."""
    name, _, key = address.partition("@")
    return STAGE_RECORDS / (f"{name}/{key}.json" if key else f"{name}.json")


def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True,
                              check=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip()


def checkout_commit(root: Path) -> dict[str, object]:
    """The commit checked out at `root` (None outside a git checkout), and whether tracked files
    other than params.yaml, dvc.lock and the stage records (which a run edits as a matter of
    course) differ."""
    commit = _git(root, "rev-parse", "HEAD")
    changed = _git(root, "status", "--porcelain", "--untracked-files=no", "--", ".",
                   ":(exclude)params.yaml", ":(exclude)dvc.lock",
                   f":(exclude){STAGE_RECORDS.as_posix()}") if commit else None
    return {"commit": commit, "uncommitted_changes": bool(changed)}


def write_stage_record(address: str, seconds: float, root: Path) -> Path:
    """Record, atomically, that the stage at `address` succeeded: its wall time, when it
    finished (UTC) and the commit it ran at. The report reads these for every stage."""
    record = {"stage": address, "seconds": round(seconds, 1),
              "finished": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
              **checkout_commit(root)}
    path = root / record_path(address)
    write_text(path, json.dumps(record, indent=2) + "\n")
    return path


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
                        format="%(asctime)s %(levelname)s %(name)s %(message)s",
                        datefmt="%H:%M:%S",
                        stream=sys.stderr)
    started = time.perf_counter()
    params_path = Path(args.pop("params"))
    # run by DVC (which names the stage in DVC_STAGE): guard what dvc.lock will record
    address, dvc_root = os.environ.get("DVC_STAGE"), os.environ.get("DVC_ROOT")
    try:
        params: Params = load_params(params_path)
        keys = (declared_params(Path(dvc_root) / "dvc.yaml", address)
                if address and dvc_root else [])
        read_at_start = read_values(params_path, keys)
        run(params, **args)
        check_params_unchanged(params_path, read_at_start)
        if address and dvc_root:  # the record is one of the stage's DVC outputs
            write_stage_record(address, time.perf_counter() - started, Path(dvc_root))
    except EXPECTED_FAILURES as err:
        log.error("stage %s failed: %s", name, describe(err))
        sys.exit(2)
    log.info("stage %s done in %.1fs", name, time.perf_counter() - started)
