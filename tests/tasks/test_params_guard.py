"""tasks.params_guard: a param edited in the moment between a stage's exit and DVC's lock write
(after the stage's own check, before DVC reads the params files) does not leave dvc.lock, or
DVC's run cache, pairing the new value with outputs made with the old one: the lock records the
value the stage ran with, and the next `dvc repro` runs it again."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from dvc.repo import Repo

from gpt1.config import read_yaml
from tasks.params_guard import mismatched, wait_for_lock
from tests.conftest import REPO, copy_repo, run

# `python` for the stage's command: the real one, then, the stage ended (its check passed, its
# watcher started), an edit of params.yaml before DVC reads it
LATE_EDIT = """\
#!/bin/sh
"{python}" "$@"
code=$?
"{python}" -c "from pathlib import Path; from gpt1.presets.edit import set_keys
set_keys(Path('params.yaml'), {{'{key}': {value!r}}})"
exit $code
"""

CELL_STAGE = """\
import os
from pathlib import Path

from tasks.stage import main


def run(params):
    Path("out").mkdir(exist_ok=True)
    Path("out", os.environ["DVC_STAGE"].partition("@")[2] + ".txt").write_text("made\\n")


main("cell", run, argv=[])
"""

CELL_DVC_YAML = """\
stages:
  cell:
    matrix:
      variant: [full]
      task: [sst2]
    cmd: python cell.py
    params:
      - analysis.ablation.tasks.${item.task}
    outs:
      - out/${item.variant}-${item.task}.txt
    metrics:
      - metrics/stages/cell/${item.variant}-${item.task}.json:
          cache: false
"""


@dataclass(frozen=True)
class Case:
    stage: str
    record: Path
    declared: str  # the key the stage declares
    edited: tuple[str, ...]  # the part of it edited late
    late: object  # the value it gets


def _tiny_repo(tmp_path: Path) -> Path:
    """The real ingest stage, on the tiny preset: the cheapest stage that declares params (its
    code's fingerprint, stage `code`, written first)."""
    repo = copy_repo(tmp_path / "repo")
    run([sys.executable, "-m", "gpt1.cli", "preset", "tiny"], repo)
    _dvc(repo, "repro", "code")
    return repo


def _cell_repo(tmp_path: Path) -> Path:
    """A matrix stage's cell in a project of its own, run through `tasks.stage.main`."""
    repo = tmp_path / "repo"
    repo.mkdir()
    shutil.copy(REPO / "params.yaml", repo / "params.yaml")
    (repo / "cell.py").write_text(CELL_STAGE)
    (repo / "dvc.yaml").write_text(CELL_DVC_YAML)
    Repo.init(str(repo), no_scm=True).close()
    return repo


CASES = {"ingest": (_tiny_repo, Case("ingest", Path("metrics/stages/ingest.json"), "ingest",
                                     ("doc_chars",), 21000)),
         "matrix": (_cell_repo, Case("cell@full-sst2", Path("metrics/stages/cell/full-sst2.json"),
                                     "analysis.ablation.tasks.sst2", (), [300]))}


def _dig(value: object, keys: tuple[str, ...]) -> object:
    for key in keys:
        value = value[key]  # type: ignore[index]
    return value


def _locked(repo: Path, case: Case) -> dict:
    return read_yaml((repo / "dvc.lock").read_text())["stages"][case.stage]


def _locked_value(repo: Path, case: Case) -> object:
    return _dig(_locked(repo, case)["params"]["params.yaml"][case.declared], case.edited)


def _recorded_value(repo: Path, case: Case) -> object:
    record = json.loads((repo / case.record).read_text())
    return _dig(next(p["value"] for p in record["params"] if p["key"] == case.declared),
                case.edited)


def _dvc(repo: Path, *args: str, path: str | None = None) -> subprocess.CompletedProcess:
    env = {"PYTHONPATH": str(REPO), **({"PATH": path} if path else {})}
    return run([sys.executable, "-m", "dvc", *args], repo, env=env)


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_param_edited_before_dvc_locks_the_run_is_put_right(tmp_path: Path,
                                                              name: str) -> None:
    make, case = CASES[name]
    repo = make(tmp_path)
    ran_with = _dig(read_yaml((repo / "params.yaml").read_text()),
                    (*case.declared.split("."), *case.edited))
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "python").write_text(LATE_EDIT.format(
        python=sys.executable, key=".".join((case.declared, *case.edited)), value=case.late))
    (shim / "python").chmod(0o755)
    path = os.pathsep.join([str(shim), str(Path(sys.executable).parent), os.environ["PATH"]])
    first = _dvc(repo, "repro", "--single-item", case.stage, path=path)
    assert f"Running stage '{case.stage}'" in first.stdout, first.stderr
    assert _recorded_value(repo, case) == ran_with != case.late

    # DVC recorded the late value; the watcher puts back the one the outputs were made with,
    # then says so (dvc.lock read only then: DVC's writers rewrite it in place)
    said = f"params.yaml: {case.declared} changed after stage {case.stage} ended, before DVC " \
           "recorded its params: dvc.lock now records the values the stage ran with"
    log = repo / ".dvc/tmp/gpt1-params-guard.log"
    deadline = time.monotonic() + 30
    while said not in log.read_text():
        assert time.monotonic() < deadline, "no watcher put dvc.lock right"
        time.sleep(0.2)
    assert _locked_value(repo, case) == ran_with
    record = json.loads((repo / case.record).read_text())
    locked = _locked(repo, case)
    assert [out["md5"] for out in locked["outs"] if out["path"] == case.record.as_posix()] == [
        hashlib.md5((repo / case.record).read_bytes()).hexdigest()]
    assert not mismatched(record["params"], locked["params"])
    # and no run-cache entry hands these outputs back for the late value
    cached = [read_yaml(p.read_text()) for p in (repo / ".dvc/cache/runs").glob("*/*/*")]
    ours = [e for e in cached  # the entries of this stage's runs (not those of stage code)
            if any(out["path"] == case.record.as_posix() for out in e.get("outs", []))]
    assert [e for e in ours if mismatched(record["params"], e["params"])] == []

    # The params changed since the run, as DVC now sees it: it runs the stage again
    status = _dvc(repo, "status", case.stage).stdout
    assert re.search(rf"params\.yaml:\s+modified:\s+{re.escape(case.declared)}\n", status), status
    again = _dvc(repo, "repro", "--single-item", case.stage)
    assert f"Running stage '{case.stage}'" in again.stdout and "is cached" not in again.stdout
    assert _recorded_value(repo, case) == _locked_value(repo, case) == case.late
    assert "up to date" in _dvc(repo, "status", case.stage).stdout


def test_values_compare_as_read_from_yaml_and_from_json() -> None:
    """A mapping's number keys (YAML) are strings once through a JSON record: equal still."""
    ran_with = [{"file": "params.yaml", "key": "tasks.x", "value": {"1": "neg", "lr": 0.1}},
                {"file": "params.yaml", "key": "seed", "value": 3}]
    assert mismatched(ran_with, {"params.yaml": {"tasks.x": {1: "neg", "lr": 0.1}, "seed": 3}}) \
        == []
    assert mismatched(ran_with, {"params.yaml": {"tasks.x": {1: "neg", "lr": 0.2}, "seed": 3}}) \
        == [("params.yaml", "tasks.x")]
    assert mismatched(ran_with, {"params.yaml": {"tasks.x": {1: "neg", "lr": 0.1}}}) == [
        ("params.yaml", "seed")]


def test_a_watcher_stops_once_dvc_has_ended_without_locking_the_run(tmp_path: Path) -> None:
    """DVC failed after the stage's command (an output missing, say): nothing to wait for."""
    record = Path("metrics/stages/ingest.json")
    (tmp_path / record).parent.mkdir(parents=True)
    (tmp_path / record).write_text("{}\n")
    md5 = hashlib.md5(b"{}\n").hexdigest()  # the record is the run's: DVC's end alone stops it
    ended = subprocess.Popen([sys.executable, "-c", ""])
    ended.wait()
    started = time.monotonic()
    assert wait_for_lock(tmp_path, "ingest", record, md5, ended.pid, seconds=60) is None
    assert time.monotonic() - started < 5
