"""The command-line shell every stage shares: parse `--params`, set up logging, report errors."""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from gpt1.atomic import write_text
from gpt1.config import Params, ParamsError, load_params, read_yaml
from gpt1.errors import describe, is_input_error
from tasks.paths import STAGE_RECORDS

log = logging.getLogger(__name__)

VERDICTS = Path(".dvc/tmp/gpt1-verdicts")  # per stage: how its command last ended


def declared_params(root: Path, address: str) -> dict[str, list[str]]:
    """The params the stage at `address` (`pretrain`, `finetune@sst2`, `ablation@full-sst2`)
    declares, as DVC itself resolves them from its stage index (foreach, matrix and `${...}`
    interpolation alike): each params file (relative to `root`) with its keys (none: the whole
    file). These are the values DVC records in dvc.lock once the stage succeeds."""
    # DVC is imported only here: a stage run by hand needs none of it
    from dvc.dependency.param import ParamsDependency
    from dvc.repo import Repo

    with Repo(str(root)) as repo:
        (stage,) = repo.stage.collect(f"{root / 'dvc.yaml'}:{address}")  # not cwd's
    return {dep.def_path: list(dep.params) for dep in stage.deps
            if isinstance(dep, ParamsDependency)}


def params_files(root: Path) -> list[str]:
    """The params files a stage of `root`'s dvc.yaml may declare keys of: DVC's default
    `params.yaml`, and each file a stage names (`- other.yaml: [key]`)."""
    stages = read_yaml((root / "dvc.yaml").read_text(encoding="utf-8")).get("stages", {})
    named = {name for stage in stages.values() for entry in stage.get("do", stage).get(
        "params", []) if isinstance(entry, dict) for name in entry}
    return sorted({"params.yaml", *named})


def read_files(root: Path, names: list[str]) -> dict[str, str | None]:
    """The text of each of `names` under `root` (None for one that does not exist)."""
    return {name: (root / name).read_text(encoding="utf-8") if (root / name).is_file() else None
            for name in names}


def _values(texts: dict[str, str | None], declared: dict[str, list[str]]
            ) -> dict[tuple[str, str], object]:
    """The `declared` params in `texts`, by (file, dotted key); key "" is a whole file. A key
    or file that is missing reads None."""
    values: dict[tuple[str, str], object] = {}
    for name, keys in declared.items():
        text = texts.get(name)
        raw = read_yaml(text) if text is not None else None
        for dotted in keys or [""]:
            node: object = raw
            for part in filter(None, dotted.split(".")):
                node = node.get(part) if isinstance(node, dict) else None
            values[(name, dotted)] = node
    return values


def check_params_unchanged(root: Path, address: str, at_start: dict[str, str | None]) -> None:
    """Fail if a param the stage at `address` declares changed while it ran: DVC reads the
    params files after the command ends, and would record the new value beside outputs made
    with the old one. `at_start` holds the params files as they were when it started; only if
    one changed is DVC asked which keys the stage declares (that costs a second)."""
    now = read_files(root, list(at_start))
    if now == at_start:
        return
    declared = declared_params(root, address)
    before, after = _values(at_start, declared), _values(now, declared)
    changed = [key for key in before if after[key] != before[key]]
    if changed:
        files = {name: [key for file, key in changed if file == name] for name, _ in changed}
        what = "; ".join(f"{name}: {', '.join(keys)}" if any(keys) else name
                         for name, keys in files.items())
        raise ParamsError(f"{what} changed while the stage ran; its outputs were made with the "
                          "values it read at the start, so it fails rather than let dvc.lock "
                          "record the new ones: run it again")


def verdict_path(root: Path, address: str) -> Path:
    """Where the stage at `address` leaves its verdict for the flows: in DVC's scratch folder
    (neither tracked nor an output), replaced by each run of its command."""
    return root / VERDICTS / f"{address}.json"


def write_verdict(root: Path, address: str, verdict: str, message: str = "") -> None:
    """How the stage's command ended: `ok`, `input_error` (exit 2: nothing to retry) or `bug`
    (a traceback, exit 1). The flows judge a stage by this, not by what DVC prints."""
    write_text(verdict_path(root, address),
               json.dumps({"stage": address, "verdict": verdict, "message": message}) + "\n")


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
    """Run stage `name`: `run(params, **extra_args)`. Bad input (`gpt1.errors.is_input_error`)
    exits 2 with one line; anything else is a bug, and keeps its traceback (exit 1)."""
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
    # run by DVC (which names the stage in DVC_STAGE): guard what dvc.lock will record, and
    # leave the verdict the flows read
    address, dvc_root = os.environ.get("DVC_STAGE"), os.environ.get("DVC_ROOT")
    root = Path(dvc_root) if address and dvc_root else None
    try:
        # read before the params are: a change in between then shows as a change
        at_start = read_files(root, params_files(root)) if root else {}
        params: Params = load_params(params_path)
        run(params, **args)
        if root and address:
            check_params_unchanged(root, address, at_start)
            write_stage_record(address, time.perf_counter() - started, root)
    except Exception as err:  # judged, recorded for the flows, and re-raised unless bad input
        verdict = "input_error" if is_input_error(err) else "bug"
        message = describe(err) if verdict == "input_error" else repr(err)
        if root and address and main_process:
            write_verdict(root, address, verdict, message)
        if verdict == "bug":
            raise
        log.error("stage %s failed: %s", name, message)
        sys.exit(2)
    if root and address and main_process:
        write_verdict(root, address, "ok")
    log.info("stage %s done in %.1fs", name, time.perf_counter() - started)
