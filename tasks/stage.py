"""The command-line shell every stage shares: parse `--params`, set up logging, report errors."""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import logging
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from ruamel.yaml import YAMLError

from gpt1.atomic import sweep_stale, write_text
from gpt1.config import Params, ParamsError, load_params, read_yaml, yaml_error
from gpt1.dag import DAG_FILE
from gpt1.dag import check as check_dag
from gpt1.errors import InputError, describe, is_input_error
from gpt1.records import STATUS_FILE, TaskStatus, read_record, record_not_run
from tasks.params_guard import (
    RanWith,
    check_params_unchanged,
    params_files,
    read_files,
    watch_lock,
)
from tasks.paths import RAW_TASKS, REPORT_RECORD, STAGE_RECORDS

log = logging.getLogger(__name__)

VERDICTS = Path(".dvc/tmp/gpt1-verdicts")  # per stage: how its command last ended
INTERPOLATION = re.compile(r"\$\{[^}]*\}")  # `${item}` in a foreach or matrix stage's paths


def verdict_path(root: Path, address: str) -> Path:
    """Where the stage at `address` leaves its verdict for the flows: in DVC's scratch folder
    (neither tracked nor an output), replaced by each run of its command."""
    return root / VERDICTS / f"{address}.json"


def write_verdict(root: Path, address: str, verdict: str, message: str = "") -> None:
    """How the stage's command ended: `ok`, `input_error` (exit 2: nothing to retry) or `bug`
    (a traceback, exit 1). The flows judge a stage by this, not by what DVC prints."""
    write_text(verdict_path(root, address),
               json.dumps({"stage": address, "verdict": verdict, "message": message}) + "\n")


def add_item_arguments(parser: argparse.ArgumentParser, helps: dict[str, str]) -> None:
    """The arguments naming a foreach or matrix stage's item (`--task`; `--variant --task`),
    each with its help. Run by DVC, they default to the parts of the stage's name
    (`finetune@sst2`; `ablation@full-sst2`, a matrix's values joined by `-`, which neither a
    variant nor a task name holds): dvc.yaml's commands then carry no value of params.yaml,
    whose task names would otherwise reach DVC's shell, even with `dvc repro --single-item`,
    which runs a stage before any other has read params.yaml. By hand, they are required."""
    address = os.environ.get("DVC_STAGE", "") if os.environ.get("DVC_ROOT") else ""
    _, _, key = address.partition("@")
    parts = key.split("-", len(helps) - 1) if key else []
    given = dict(zip(helps, parts, strict=True)) if len(parts) == len(helps) else {}
    for name, text in helps.items():
        parser.add_argument(f"--{name}", required=name not in given, default=given.get(name),
                            help=text)


def ingested_rows(name: str, listed: Collection[str], key: str, metrics: Path,
                  folders: tuple[Path, ...] = (), why_prefix: str = "",
                  **fields: Any) -> dict[str, int] | None:
    """The rows of each split ingest found for task `name`, where the stage has work to do. A
    task not in `listed` (params key `key`) is bad input; a task ingest did not run gets its
    stage's `metrics` file (holding `fields` beside why) and output `folders` saying why
    (`record_not_run`: ingest's reason after `why_prefix`), and None."""
    if name not in listed:
        raise InputError(f"task {name!r} is not in {key} ({sorted(listed)})")
    status = read_record(RAW_TASKS / name / STATUS_FILE, "ingest", TaskStatus)
    if status["run"]:
        return status["rows"]
    reason = why_prefix + status["reason"]
    record_not_run(reason, folders=folders, metrics=metrics, **fields)
    log.info("not run: %s", reason)
    return None


def record_path(address: str) -> Path:
    """Where the record of the stage at `address` lies: `metrics/stages/<stage>.json`, or
    `metrics/stages/<stage>/<key>.json` for one of a foreach or matrix stage (`finetune@sst2`);
    the report's own beside its pages, as it depends on all of metrics/ (dvc.yaml declares the
    same paths)."""
    if address == "report":
        return REPORT_RECORD
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


def write_stage_record(address: str, seconds: float, root: Path,
                       params: RanWith | None = None) -> Path:
    """Record, atomically, that the stage at `address` succeeded: its wall time, when it
    finished (UTC), the commit it ran at and the params it ran with (`check_params_unchanged`).
    The report reads these for every stage."""
    record = {"stage": address, "seconds": round(seconds, 1),
              "finished": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
              **checkout_commit(root),
              # a list, which `dvc metrics show` leaves out: the values are no metrics
              "params": params or []}
    path = root / record_path(address)
    write_text(path, json.dumps(record, indent=2, default=str) + "\n")
    return path


def user_paths(params_path: Path, params: Params | None, others: list[Path] | None = None
               ) -> list[Path]:
    """The paths a stage reads that the user gives: the params file (and `others`: the other
    params files dvc.yaml names), the data root (every file params names lies under it) and
    the folder of a released model to import. An OSError about a path under one of them is bad
    input; about any other path (a file the program itself needs) a bug."""
    paths = [params_path, *(others or [])]
    if params is not None:
        paths.append(Path(params.ingest.root))
        if params.pretrain.released:
            paths.append(Path(params.pretrain.source_dir))
    return paths


def _yaml(root: Path, name: str, note: str = "") -> Any:
    """The YAML file `name` under `root` (the user's: dvc.yaml, a params file); None where it
    is absent, ParamsError naming it (and its line) where it is not UTF-8 text or not YAML."""
    path = root / name
    try:
        return read_yaml(path.read_bytes().decode("utf-8")) if path.is_file() else None
    except UnicodeDecodeError as err:
        raise ParamsError(f"{name}: not UTF-8 text (byte {err.start}){note}") from None
    except YAMLError as err:
        raise ParamsError(f"{yaml_error(Path(name), err)}{note}") from None


def _contents(root: Path, names: list[str]) -> dict[str, bytes | None]:
    """The bytes of each of `names` under `root` (None for one that does not exist)."""
    return {name: (root / name).read_bytes() if (root / name).is_file() else None
            for name in names}


def check_yaml(root: Path, names: list[str], note: str = "") -> None:
    """ParamsError naming the first of the files `names` under `root` (dvc.yaml, the params
    files) that is not UTF-8 YAML, and its line, with `note` after: the user's input, which the
    params guard and DVC read raw (a YAML error from them would be a bug's traceback)."""
    for name in names:
        _yaml(root, name, note)


def _reads_dag(root: Path) -> bool:
    """Whether `root`'s dvc.yaml declares its per-task stages from dag.yaml (gpt1.dag)."""
    raw = _yaml(root, "dvc.yaml")
    listed = raw.get("vars") if isinstance(raw, dict) else None
    return isinstance(listed, list) and DAG_FILE.as_posix() in listed


def output_folders(root: Path) -> list[Path]:
    """The folders under `root` that the outputs of its dvc.yaml's stages lie in (where their
    writers leave temporaries), and that of the verdicts; `${...}` matches any name there.
    Only the verdicts' where dvc.yaml is absent or unreadable (a stage run by hand)."""
    try:
        raw = _yaml(root, "dvc.yaml")
    except ParamsError:  # DVC runs no stage then: a broken dvc.yaml is for DVC to report
        raw = None
    stages = raw.get("stages") if isinstance(raw, dict) else None
    patterns = {VERDICTS.as_posix()}
    for stage in stages.values() if isinstance(stages, dict) else []:
        body = stage.get("do", stage) if isinstance(stage, dict) else None
        for kind in ("outs", "metrics", "plots"):
            entries = body.get(kind) if isinstance(body, dict) else None
            for entry in entries if isinstance(entries, list) else []:
                path = next(iter(entry), None) if isinstance(entry, dict) else entry
                if isinstance(path, str) and path.strip("/"):
                    patterns.add(Path(INTERPOLATION.sub("*", path.strip("/"))).parent.as_posix())
    folders = {folder for pattern in patterns
               for folder in (root.glob(pattern) if "*" in pattern else [root / pattern])}
    return sorted(folder for folder in folders if folder.is_dir())


def sweep_temporaries(root: Path) -> None:
    """Clear what killed writers left beside the outputs of `root`'s stages (`sweep_stale`): a
    stage that DVC restores from its run cache never runs its writer again, so each stage's
    start sweeps the folders of every stage's outputs."""
    for folder in output_folders(root):
        sweep_stale(folder)


def main(name: str, run: Callable[..., None], argv: list[str] | None = None,
         extra: Callable[[argparse.ArgumentParser], None] | None = None) -> None:
    """Run stage `name`: `run(params, **extra_args)`. Bad input (`gpt1.errors.is_input_error`,
    an OSError only about a path of `user_paths`) exits 2 with one line; anything else is a
    bug, and keeps its traceback (exit 1). It starts by sweeping what killed writers left
    beside the outputs (`sweep_temporaries`)."""
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
    # leave the verdict the flows read. The project is the working directory, where DVC runs
    # dvc.yaml's commands; not DVC_ROOT, which in an experiment's temporary workspace (`dvc exp
    # run --temp`, a queue worker's) still names the checkout the experiment came from
    address = os.environ.get("DVC_STAGE")
    root = Path.cwd() if address and os.environ.get("DVC_ROOT") else None
    params: Params | None = None
    names: list[str] = []
    at_start: dict[str, str | None] = {}
    user_files: dict[str, bytes | None] = {}
    try:
        if main_process:
            sweep_temporaries(root or Path())
        if root:
            check_yaml(root, ["dvc.yaml"])
            names = params_files(root)
            check_yaml(root, names)
            # read before the params are: a change in between then shows as a change
            at_start = read_files(root, names)
            user_files = _contents(root, ["dvc.yaml", *names])
        params = load_params(params_path)
        if root and _reads_dag(root):  # DVC declared the stages from dag.yaml: params' own?
            check_dag(root, params)
        run(params, **args)
        if root and address:
            if _contents(root, ["dvc.yaml", *names]) != user_files:  # else checked at the start
                check_yaml(root, ["dvc.yaml", *names], "; it changed while the stage ran: "
                                                       "mend it and run the stage again")
            ran_with = check_params_unchanged(root, address, at_start)
            if main_process:  # one record, whose run a watcher follows until DVC locks it
                record = write_stage_record(address, time.perf_counter() - started, root,
                                            ran_with)
                watch_lock(root, address, record)
    except Exception as err:  # judged, recorded for the flows, and re-raised unless bad input
        given = user_paths(params_path, params, [root / n for n in names] if root else None)
        verdict = "input_error" if is_input_error(err, given) else "bug"
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
    # the work is done: what the process holds (torch's, spaCy's objects) is left for its end
    # to free, where the interpreter's exit would first collect it all (0.3-0.5 s a stage)
    gc.freeze()
