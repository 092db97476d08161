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
    cmd: python stage.py
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
    """The real clean stage, on the tiny preset: the cheapest stage that declares params (what
    it reads, ingest's corpus, and its code's fingerprint, stage `code`, written first)."""
    repo = copy_repo(tmp_path / "repo")
    run([sys.executable, "-m", "gpt1.cli", "preset", "tiny"], repo)
    _dvc(repo, "repro", "ingest")
    return repo


# a stage that depends on params.yaml as a file, as the report does: dvc.lock records its md5
PAGE_STAGE = """\
from pathlib import Path

from tasks.stage import main


def run(params):
    Path("out").mkdir(exist_ok=True)
    Path("out", "page.txt").write_text("made\\n")
    if Path("edit-mid-run").exists():
        with Path("params.yaml").open("a") as f:
            f.write("# a comment, added while the stage ran\\n")


main("page", run, argv=[])
"""

PAGE_DVC_YAML = """\
stages:
  page:
    cmd: python stage.py
    deps:
      - params.yaml
    outs:
      - out/page.txt
    metrics:
      - metrics/stages/page.json:
          cache: false
"""


def _own_repo(tmp_path: Path, stage: str, dvc_yaml: str) -> Path:
    """A project of its own: params.yaml, one stage's script (`stage.py`, run through
    `tasks.stage.main`) and its dvc.yaml."""
    repo = tmp_path / "repo"
    repo.mkdir()
    shutil.copy(REPO / "params.yaml", repo / "params.yaml")
    (repo / "stage.py").write_text(stage)
    (repo / "dvc.yaml").write_text(dvc_yaml)
    Repo.init(str(repo), no_scm=True).close()
    return repo


def _cell_repo(tmp_path: Path) -> Path:
    """A matrix stage's cell."""
    return _own_repo(tmp_path, CELL_STAGE, CELL_DVC_YAML)


def _page_repo(tmp_path: Path) -> Path:
    """A stage that depends on params.yaml as a file."""
    return _own_repo(tmp_path, PAGE_STAGE, PAGE_DVC_YAML)


def _late_edit_path(tmp_path: Path, key: str, value: object) -> str:
    """A PATH whose `python` runs the stage, then edits `key` of params.yaml to `value`."""
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "python").write_text(LATE_EDIT.format(python=sys.executable, key=key, value=value))
    (shim / "python").chmod(0o755)
    return os.pathsep.join([str(shim), str(Path(sys.executable).parent), os.environ["PATH"]])


def _watcher_said(repo: Path, said: str) -> None:
    """Wait for the watcher's line (dvc.lock read only then: DVC rewrites it in place)."""
    log = repo / ".dvc/tmp/gpt1-params-guard.log"
    deadline = time.monotonic() + 30
    while not log.is_file() or said not in log.read_text():
        assert time.monotonic() < deadline, "no watcher put dvc.lock right"
        time.sleep(0.2)


CASES = {"clean": (_tiny_repo, Case("clean", Path("metrics/stages/clean.json"), "clean",
                                    ("min_chars",), 101)),
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
    path = _late_edit_path(tmp_path, ".".join((case.declared, *case.edited)), case.late)
    first = _dvc(repo, "repro", "--single-item", case.stage, path=path)
    assert f"Running stage '{case.stage}'" in first.stdout, first.stderr
    assert _recorded_value(repo, case) == ran_with != case.late

    # DVC recorded the late value; the watcher puts back the one the outputs were made with,
    # then says so
    _watcher_said(repo, f"params.yaml: {case.declared} changed after stage {case.stage} ended, "
                        "before DVC recorded its params: dvc.lock now records the values the "
                        "stage ran with")
    assert _locked_value(repo, case) == ran_with
    record = json.loads((repo / case.record).read_text())
    locked = _locked(repo, case)
    assert [out["md5"] for out in locked["outs"] if out["path"] == case.record.as_posix()] == [
        hashlib.md5((repo / case.record).read_bytes()).hexdigest()]
    assert not mismatched(record["params"], locked)
    # and no run-cache entry hands these outputs back for the late value
    cached = [read_yaml(p.read_text()) for p in (repo / ".dvc/cache/runs").glob("*/*/*")]
    ours = [e for e in cached  # the entries of this stage's runs (not those of stage code)
            if any(out["path"] == case.record.as_posix() for out in e.get("outs", []))]
    assert [e for e in ours if mismatched(record["params"], e)] == []

    # The params changed since the run, as DVC now sees it: it runs the stage again
    status = _dvc(repo, "status", case.stage).stdout
    assert re.search(rf"params\.yaml:\s+modified:\s+{re.escape(case.declared)}\n", status), status
    again = _dvc(repo, "repro", "--single-item", case.stage)
    assert f"Running stage '{case.stage}'" in again.stdout and "is cached" not in again.stdout
    assert _recorded_value(repo, case) == _locked_value(repo, case) == case.late
    assert "up to date" in _dvc(repo, "status", case.stage).stdout


def test_a_params_file_a_stage_depends_on_edited_before_dvc_locks_the_run_is_put_right(
        tmp_path: Path) -> None:
    """The report's kind of dependency: params.yaml as a file. dvc.lock records the md5 of the
    bytes the stage read, the run cache pairs the outputs with no other, and `dvc repro` runs
    the stage again for the edit."""
    repo = _page_repo(tmp_path)
    read = (repo / "params.yaml").read_bytes()
    ran_with = hashlib.md5(read).hexdigest()
    path = _late_edit_path(tmp_path, "pretrain.max_steps", 700)
    assert "Running stage 'page'" in _dvc(repo, "repro", "page", path=path).stdout
    record = json.loads((repo / "metrics/stages/page.json").read_text())
    assert record["params"] == [{"file": "params.yaml", "md5": ran_with, "size": len(read)}]
    _watcher_said(repo, "params.yaml changed after stage page ended, before DVC recorded its "
                        "params: dvc.lock now records the values the stage ran with")
    locked = read_yaml((repo / "dvc.lock").read_text())["stages"]["page"]
    assert [d["md5"] for d in locked["deps"] if d["path"] == "params.yaml"] == [ran_with]
    assert not mismatched(record["params"], locked)
    # DVC's run-cache entry paired the outputs with the late md5: dropped
    cached = [read_yaml(p.read_text()) for p in (repo / ".dvc/cache/runs").glob("*/*/*")]
    assert [e for e in cached if mismatched(record["params"], e)] == []

    assert "params.yaml" in _dvc(repo, "status", "page").stdout
    again = _dvc(repo, "repro", "page")
    assert "Running stage 'page'" in again.stdout and "is cached" not in again.stdout
    assert "up to date" in _dvc(repo, "status", "page").stdout


def test_a_params_file_a_stage_depends_on_edited_while_it_ran_fails_it(tmp_path: Path) -> None:
    """Even a comment: dvc.lock would record the new md5 beside outputs of the old text."""
    repo = _page_repo(tmp_path)
    (repo / "edit-mid-run").touch()
    failed = run([sys.executable, "-m", "dvc", "repro", "page"], repo,
                 env={"PYTHONPATH": str(REPO)}, check=False)
    assert failed.returncode != 0
    assert ("stage page failed: params.yaml changed while the stage ran; its outputs were made "
            "with the values it read at the start") in failed.stderr
    assert not (repo / "dvc.lock").exists()  # DVC locked nothing


def test_values_compare_as_read_from_yaml_and_from_json() -> None:
    """A mapping's number keys (YAML) are strings once through a JSON record: equal still."""
    ran_with = [{"file": "params.yaml", "key": "tasks.x", "value": {"1": "neg", "lr": 0.1}},
                {"file": "params.yaml", "key": "seed", "value": 3}]
    assert mismatched(ran_with, {"params": {"params.yaml": {"tasks.x": {1: "neg", "lr": 0.1},
                                                            "seed": 3}}}) == []
    assert mismatched(ran_with, {"params": {"params.yaml": {"tasks.x": {1: "neg", "lr": 0.2},
                                                            "seed": 3}}}) == [
        ("params.yaml", "tasks.x")]
    assert mismatched(ran_with, {"params": {"params.yaml": {"tasks.x": {1: "neg", "lr": 0.1}}}}
                      ) == [("params.yaml", "seed")]


def test_a_params_file_compares_by_the_md5_a_lock_records_of_it() -> None:
    ran_with = [{"file": "params.yaml", "md5": "abc", "size": 3}]
    assert mismatched(ran_with, {"deps": [{"path": "params.yaml", "md5": "abc", "size": 3}]}) == []
    assert mismatched(ran_with, {"deps": [{"path": "params.yaml", "md5": "abd", "size": 3}]}) == [
        ("params.yaml", "")]


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
