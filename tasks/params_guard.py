"""The params dvc.lock records for a stage are the ones it ran with. DVC reads the params files
after a stage's command ends and records those values in dvc.lock and in its run cache (and the
md5 of a params file a stage depends on as a file, as ingest and the report do). A stage run by DVC
fails if a param it declares (or such a file) changed while it ran (`check_params_unchanged`),
records what it ran with in its stage record, and leaves a watcher (`watch_lock`) for the moment
between its exit and DVC's lock write (a second or two, longer with large outputs to cache): once
DVC has locked the run, the watcher puts right a lock that records other values (`repair`)."""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import subprocess
import sys
import time
from contextlib import nullcontext, suppress
from pathlib import Path
from typing import Any

from ruamel.yaml import YAMLError

from gpt1.atomic import write_text
from gpt1.config import ParamsError, read_yaml

log = logging.getLogger(__name__)

DECLARED_CACHE = Path(".dvc/tmp/gpt1-declared-params.json")  # every stage's, for one dvc.yaml
# in its key: a cache an older layout wrote is not read (nor one that keyed stages by the address
# relative to a working directory elsewhere, as a `dvc exp` workspace's stage once wrote here)
CACHE_FORMAT = b"params and files by name\0"
WATCH_LOG = Path(".dvc/tmp/gpt1-params-guard.log")  # what watchers say, DVC's stderr no terminal
WATCH_SECONDS = 3600.0  # the most a watcher waits for DVC to lock its run (hashing large outputs)
POLL_SECONDS = 0.1

Texts = dict[str, str | None]  # params file -> its text (None: no such file)
Declared = dict[str, list[str]]  # params file -> the keys a stage declares (none: the whole file)
# {"file", "key", "value"} of each declared param; {"file", "md5", "size"} of a params file the
# stage depends on as a file (its bytes, as dvc.lock records a dependency)
RanWith = list[dict[str, Any]]


def declared(root: Path, address: str, names: list[str] | None = None) -> dict[str, Any]:
    """What the stage at `address` (`pretrain`, `finetune@sst2`, `ablation@full-sst2`) declares,
    as DVC itself resolves it from its stage index (foreach, matrix and `${...}` interpolation
    alike): under `params`, each params file (relative to `root`) with its keys (none: the whole
    file), whose values DVC records in dvc.lock once the stage succeeds; under `files`, the params
    files (of `names`) it depends on as files (`deps:`), whose md5 DVC records instead."""
    return _declared(root, names)[address]


def _declared(root: Path, names: list[str] | None) -> dict[str, dict[str, Any]]:
    """Every stage's declared params and params files (`_resolve`). DVC resolves every stage at
    once, kept in `DECLARED_CACHE` until dvc.yaml or a params file changes: the stages of one
    `dvc repro` pay for DVC's import and resolution (a third of a second) once."""
    names = params_files(root) if names is None else names
    digest = hashlib.sha256(CACHE_FORMAT)
    for name in ["dvc.yaml", *names]:
        path = root / name
        digest.update(name.encode() + b"\0" + (path.read_bytes() if path.is_file() else b"-"))
    cache = root / DECLARED_CACHE
    with suppress(OSError, ValueError, KeyError):
        kept = json.loads(cache.read_text(encoding="utf-8"))
        if kept["key"] == digest.hexdigest():
            return kept["stages"]
    stages = _resolve(root, names)
    write_text(cache, json.dumps({"key": digest.hexdigest(), "stages": stages}) + "\n")
    return stages


def _resolve(root: Path, names: list[str]) -> dict[str, dict[str, Any]]:
    """Every stage's declared params (`params`) and the params files of `names` it depends on
    as files (`files`), by address, as DVC resolves them."""
    # DVC is imported only here: a stage run by hand needs none of it
    from dvc.dependency.param import ParamsDependency
    from dvc.repo import Repo

    with Repo(str(root)) as repo:  # by name: `addressing` is relative to the working directory
        return {stage.name: {
            "params": {dep.def_path: list(dep.params) for dep in stage.deps
                       if isinstance(dep, ParamsDependency)},
            "files": [dep.def_path for dep in stage.deps
                      if not isinstance(dep, ParamsDependency) and dep.def_path in names]}
            for stage in repo.index.stages}


def params_files(root: Path) -> list[str]:
    """The params files a stage of `root`'s dvc.yaml may declare keys of: DVC's default
    `params.yaml`, and each file a stage names (`- other.yaml: [key]`)."""
    stages = read_yaml((root / "dvc.yaml").read_text(encoding="utf-8")).get("stages", {})
    named = {name for stage in stages.values() for entry in stage.get("do", stage).get(
        "params", []) if isinstance(entry, dict) for name in entry}
    return sorted({"params.yaml", *named})


def read_files(root: Path, names: list[str]) -> Texts:
    """The text of each of `names` under `root` (None for one that does not exist), its line
    ends as they are: its md5 is the file's."""
    return {name: (root / name).read_bytes().decode("utf-8") if (root / name).is_file() else None
            for name in names}


def _values(texts: Texts, declared: Declared) -> dict[tuple[str, str], object]:
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


def _named(params: list[tuple[str, str]]) -> str:
    """`params.yaml: ingest, tasks; other.yaml` for those (file, key) pairs ("": a whole file)."""
    files = {name: [key for file, key in params if file == name] for name, _ in params}
    return "; ".join(f"{name}: {', '.join(keys)}" if any(keys) else name
                     for name, keys in files.items())


def check_params_unchanged(root: Path, address: str, at_start: Texts) -> RanWith:
    """The params the stage at `address` declares, with the values it read at its start
    (`at_start`: the params files then), and the md5 of each params file it depends on as a
    file, for its record. Fails if any changed while it ran: DVC reads the params files after
    the command ends, and would record the new value beside outputs made with the old one. Asks
    DVC what the stage declares (`declared`)."""
    names = list(at_start)
    stage = declared(root, address, names)
    files = stage["files"]
    before = _values(at_start, stage["params"])
    now = read_files(root, names)
    after = before if now == at_start else _values(now, stage["params"])
    changed = [key for key in before if after[key] != before[key]]
    changed += [(name, "") for name in files if now[name] != at_start[name]]
    if changed:
        raise ParamsError(f"{_named(changed)} changed while the stage ran; its outputs were made "
                          "with the values it read at the start, so it fails rather than let "
                          "dvc.lock record the new ones: run it again")
    return [*({"file": file, "key": key, "value": value} for (file, key), value in before.items()),
            *(_hashed(name, at_start[name]) for name in files)]


def _hashed(name: str, text: str | None) -> dict[str, Any]:
    """The params file `name` as dvc.lock records a file dependency of this text: its md5 and
    size (None: no such file)."""
    data = text.encode("utf-8") if text is not None else None
    return {"file": name, "md5": hashlib.md5(data).hexdigest() if data is not None else None,
            "size": len(data) if data is not None else None}


def _canonical(value: object) -> str:
    """`value` as JSON with sorted keys: equal for a value read from YAML (dvc.lock) and the same
    value written to and read from JSON (a stage record), whose mapping keys are all strings."""
    def keys_as_text(node: object) -> object:
        if isinstance(node, dict):
            return {str(k): keys_as_text(v) for k, v in node.items()}
        return [keys_as_text(v) for v in node] if isinstance(node, list) else node

    return json.dumps(keys_as_text(value), sort_keys=True, default=str)


def _locked_value(params: dict[str, Any], file: str, key: str) -> object:
    """The value of `file`'s `key` ("": the whole file) in a dvc.lock entry's `params`."""
    values = params.get(file)
    return values if not key else values.get(key) if isinstance(values, dict) else None


def mismatched(ran_with: RanWith, entry: dict[str, Any]) -> list[tuple[str, str]]:
    """The (file, key) of each param of `ran_with` whose value a dvc.lock (or run-cache)
    `entry` records otherwise in its `params`, and (file, "") of each params file whose md5 its
    `deps` record otherwise."""
    params = entry.get("params", {})
    hashed = {dep.get("path"): dep.get("md5") for dep in entry.get("deps", [])}
    return [(p["file"], p.get("key", "")) for p in ran_with
            if ("md5" in p and hashed.get(p["file"]) != p["md5"])
            or ("md5" not in p and _canonical(_locked_value(params, p["file"], p["key"]))
                != _canonical(p["value"]))]


def _md5(path: Path) -> str | None:
    """The md5 of `path`'s bytes, as dvc.lock records an output file's (None: no such file)."""
    try:
        return hashlib.md5(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


def _ran_with(path: Path, md5: str) -> RanWith | None:
    """The params the stage record at `path` says its run ran with, if it is still the one with
    `md5` (None: another run's, or none)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    return json.loads(data)["params"] if hashlib.md5(data).hexdigest() == md5 else None


def _holds(entry: dict[str, Any], record: Path, md5: str) -> bool:
    """Whether a dvc.lock or run-cache `entry` records the stage record `record` (relative to
    the root) with `md5`: the run that wrote it, for a record names when it finished."""
    return any(out.get("path") == record.as_posix() and out.get("md5") == md5
               for out in entry.get("outs", []))


def _lock_entry(root: Path, address: str, md5: str) -> dict[str, Any] | None:
    """The dvc.lock entry of the stage at `address`, if it names `md5` (read only then: a
    watcher looks often, and a large dvc.lock takes a while to parse)."""
    try:
        text = (root / "dvc.lock").read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    if md5 not in text:
        return None
    try:
        lock = read_yaml(text)
    except YAMLError:  # caught mid-write (DVC writes dvc.lock in place): look again
        return None
    return lock.get("stages", {}).get(address) if isinstance(lock, dict) else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def wait_for_lock(root: Path, address: str, record: Path, md5: str, dvc_pid: int,
                  seconds: float = WATCH_SECONDS) -> dict[str, Any] | None:
    """The dvc.lock entry of the stage at `address` once it records the run whose `record`
    has `md5`. None if it never does: the record is replaced (the stage runs again), DVC (process
    `dvc_pid`) ends without locking the run (it failed after the command), or `seconds` pass."""
    deadline = time.monotonic() + seconds
    while True:
        gone = not _alive(dvc_pid)  # before the look: DVC may lock the run, then end
        entry = _lock_entry(root, address, md5)
        if entry is not None and _holds(entry, record, md5):
            return entry
        if gone or _md5(root / record) != md5:
            return None
        if time.monotonic() > deadline:
            log.warning("stage %s: DVC had not recorded its run in dvc.lock after %.0f s; the "
                        "params recorded there went unchecked", address, seconds)
            return None
        time.sleep(POLL_SECONDS)


def _lock_repo(lock: Any, seconds: float) -> None:
    """Take DVC's repository lock, as its commands do, trying for up to `seconds`."""
    from dvc.lock import LockError

    deadline = time.monotonic() + seconds
    while True:
        try:
            lock.lock()  # tries for 3 s
            return
        except LockError:
            if time.monotonic() > deadline:
                raise


def _drop_run_cache(runs: Path, record: Path, md5: str, ran_with: RanWith) -> list[Path]:
    """Delete each entry of DVC's run cache (`runs`: YAML files like dvc.lock's entries) that
    pairs the record with `md5` with params other than `ran_with`: DVC would hand its outputs
    back for those params. Returns the entries deleted."""
    dropped = []
    for path in runs.glob("*/*/*"):
        text = path.read_text(encoding="utf-8")
        entry = read_yaml(text) if md5 in text else None
        if entry and _holds(entry, record, md5) and mismatched(ran_with, entry):
            path.unlink()
            with suppress(OSError):  # DVC fails on a key's folder left empty
                path.parent.rmdir()
            dropped.append(path)
    return dropped


def _put_right(entry: dict[str, Any], ran_with: RanWith, wrong: list[tuple[str, str]]) -> None:
    """Make the dvc.lock `entry` record what `ran_with` says for each (file, key) of `wrong`:
    a param's value, or a params file's md5 and size as a dependency."""
    for p in ran_with:
        if (p["file"], p.get("key", "")) not in wrong:
            continue
        if "md5" in p:
            dep = next(d for d in entry["deps"] if d.get("path") == p["file"])
            dep["md5"] = p["md5"]
            dep["size"] = p["size"]
        elif p["key"]:
            entry.setdefault("params", {}).setdefault(p["file"], {})[p["key"]] = p["value"]
        else:
            entry.setdefault("params", {})[p["file"]] = p["value"]


def repair(root: Path, address: str, record: Path, md5: str,
           seconds: float = WATCH_SECONDS) -> list[tuple[str, str]]:
    """Under DVC's repository lock: if dvc.lock still records the run of the stage at `address`
    whose record has `md5` beside params other than those the record says it ran with, record
    those instead (the truth: outputs made with these values, and the params files changed
    since, which `dvc status` shows and `dvc repro` runs again for), and delete the run-cache
    entries that pair its outputs with the other values. Returns the params put right."""
    from dvc.repo import Repo
    from dvc.utils.serialize import modify_yaml

    ran_with = _ran_with(root / record, md5)
    if not ran_with:
        return []
    with Repo(str(root)) as repo:
        _lock_repo(repo.lock, seconds)
        try:
            entry = _lock_entry(root, address, md5)
            wrong = mismatched(ran_with, entry) if entry else []
            if not wrong:
                return []
            with modify_yaml(str(root / "dvc.lock")) as lock:
                _put_right(lock["stages"][address], ran_with, wrong)
            _drop_run_cache(Path(repo.stage_cache.cache_dir), record, md5, ran_with)
        finally:
            repo.lock.unlock()
    return wrong


def watch(root: Path, address: str, record: Path, md5: str, dvc_pid: int,
          seconds: float = WATCH_SECONDS) -> list[tuple[str, str]]:
    """Wait until DVC records in dvc.lock the run of the stage at `address` whose record (at
    `record`, relative to `root`) has `md5`; if it records params other than those the run
    recorded (changed after the stage's own check, before DVC read them), put it right
    (`repair`) and say so. Returns the params put right."""
    entry = wait_for_lock(root, address, record, md5, dvc_pid, seconds)
    ran_with = _ran_with(root / record, md5) if entry else None
    if not entry or not ran_with or not mismatched(ran_with, entry):
        return []
    wrong = repair(root, address, record, md5, seconds)
    if wrong:
        log.warning("%s changed after stage %s ended, before DVC recorded its params: dvc.lock "
                    "now records the values the stage ran with, so `dvc repro` runs it again",
                    _named(wrong), address)
    return wrong


def _dvc_pid() -> int | None:
    """The DVC process that runs this stage's command, through a shell, torchrun or the like:
    the nearest ancestor that runs `dvc` (`dvc repro`, `python -m dvc repro`). None if none
    does (the stage runs in a test, or under DVC's Python API)."""
    import psutil

    for parent in psutil.Process().parents():
        with suppress(psutil.Error):
            if any(Path(arg).name in ("dvc", "dvc.exe") for arg in parent.cmdline()[:3]):
                return parent.pid
    return None


def watch_lock(root: Path, address: str, record: Path) -> None:
    """Leave a process (`watch`) that waits until DVC has recorded this run of the stage at
    `address` (its stage record: `record`, just written) in dvc.lock and checks the params it
    recorded. Detached: neither DVC nor whoever reads DVC's output waits for it. It writes to
    the terminal DVC runs in, or else to `WATCH_LOG`. Without a DVC process to follow
    (`_dvc_pid`) there is none."""
    dvc_pid = _dvc_pid()
    if dvc_pid is None:
        return
    md5 = _md5(record)
    path = root / WATCH_LOG
    path.parent.mkdir(parents=True, exist_ok=True)
    code = Path(__file__).resolve().parents[1]  # the checkout whose `tasks` runs this stage
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [
        str(code), os.environ.get("PYTHONPATH")]))}
    tty = sys.stderr.isatty()
    with nullcontext(sys.stderr) if tty else path.open("a", encoding="utf-8") as err:
        subprocess.Popen([sys.executable, "-m", "tasks.params_guard", str(root), address,
                          record.relative_to(root).as_posix(), str(md5), str(dvc_pid)],
                         cwd=root, env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)


def main(argv: list[str] | None = None) -> None:
    """`python -m tasks.params_guard ROOT STAGE RECORD MD5 DVC_PID`: `watch`, as `watch_lock`
    starts it."""
    parser = argparse.ArgumentParser(prog="python -m tasks.params_guard")
    for name in ("root", "stage", "record", "md5"):
        parser.add_argument(name)
    parser.add_argument("dvc_pid", type=int)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, datefmt="%H:%M:%S",
                        format="%(asctime)s %(levelname)s tasks.params_guard %(message)s")
    watch(Path(args.root), args.stage, Path(args.record), args.md5, args.dvc_pid)


if __name__ == "__main__":
    main()
