"""What a writer killed mid-write (kill -9) leaves beside an output: its temporary (and, where the
swap takes two renames, the old output moved aside). A rerun that DVC restores from its run cache
never runs that writer again, so every stage's start sweeps the folders of every stage's outputs
(`tasks.stage.sweep_temporaries`, `gpt1.atomic.sweep_stale`)."""

from __future__ import annotations

import logging
import os
import shutil
import sys
from pathlib import Path

import pytest

from gpt1.atomic import atomic_dir, sweep_stale
from gpt1.config import Params
from tasks.stage import main, output_folders
from tests.conftest import REPO, dvc, run

GONE = 4_194_305  # above Linux's PID_MAX_LIMIT (2**22): never a live process


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def _leave(path: Path, folder: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if folder:
        path.mkdir()
        (path / "half-written").write_text("x")
    else:
        path.write_text("x")
    return path


def test_a_folder_is_swept_of_every_killed_writers_leftovers(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "kept").mkdir()
    gone = [_leave(tmp_path / f".clean.{GONE}.k3j2h1g0.tmp", folder=True),
            _leave(tmp_path / f".plots.{GONE}.a1b2c3d4.tmp", folder=True),
            _leave(tmp_path / f".sst2.json.{GONE}.q9w8e7r6.tmp"),
            _leave(tmp_path / f".kept.{GONE}.z1x2c3v4.old")]  # kept is there: a leftover
    _leave(tmp_path / f".model.{GONE}.m1n2b3v4.old", folder=True)  # model is not: put back
    kept = [_leave(tmp_path / f".clean.{os.getpid()}.livewrit.tmp"),  # a live writer's
            _leave(tmp_path / ".notes.tmp"), _leave(tmp_path / ".x.k3j2h1g0.tmp"),  # no PID
            _leave(tmp_path / "summary.md")]
    with caplog.at_level(logging.INFO, logger="gpt1.atomic"):
        sweep_stale(tmp_path)
    assert _names(tmp_path) == sorted(["kept", "model", *(p.name for p in kept)])
    assert (tmp_path / "model" / "half-written").is_file()
    for path in gone:
        assert f"removed {path.name}, left by process {GONE}, which has exited" in caplog.text
    sweep_stale(tmp_path / "absent")  # nothing to sweep


def test_the_output_folders_are_those_dvc_yaml_declares(tmp_path: Path) -> None:
    shutil.copy(REPO / "dvc.yaml", tmp_path / "dvc.yaml")
    for folder in ("data/raw", "metrics/ablation/full", "metrics/ablation/no_aux", "reports",
                   "artifacts/finetune"):
        (tmp_path / folder).mkdir(parents=True)
    found = {p.relative_to(tmp_path).as_posix() for p in output_folders(tmp_path)}
    assert {"data", "data/raw", "metrics", "metrics/ablation/full", "metrics/ablation/no_aux",
            "reports", "artifacts", "artifacts/finetune"} <= found
    assert output_folders(tmp_path / "elsewhere") == []


@pytest.fixture()
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A checkout's dvc.yaml and params.yaml, with what killed writers of clean and report, a
    Table 5 cell and a verdict left behind, and a live writer's temporary."""
    for name in ("dvc.yaml", "params.yaml"):
        shutil.copy(REPO / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DVC_STAGE", raising=False)
    monkeypatch.delenv("RANK", raising=False)
    _leave(tmp_path / f"data/.clean.{GONE}.k3j2h1g0.tmp", folder=True)
    _leave(tmp_path / f"reports/.plots.{GONE}.a1b2c3d4.tmp", folder=True)
    _leave(tmp_path / f"metrics/ablation/full/.sst2.json.{GONE}.q9w8e7r6.tmp")
    _leave(tmp_path / f".dvc/tmp/gpt1-verdicts/.report.json.{GONE}.z1x2c3v4.tmp")
    _leave(tmp_path / f"data/.clean.{os.getpid()}.livewrit.tmp")
    return tmp_path


def _leftovers(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob(f".*.{GONE}.*"))


def test_any_stage_sweeps_every_outputs_folder_at_its_start(
        checkout: Path, caplog: pytest.LogCaptureFixture) -> None:
    swept: list[list[str]] = []

    def report(params: Params) -> None:
        swept.append(_leftovers(checkout))

    with caplog.at_level(logging.INFO, logger="gpt1.atomic"):
        main("report", report, argv=[])
    assert swept == [[]]  # before the stage's own work
    assert (checkout / f"data/.clean.{os.getpid()}.livewrit.tmp").is_file()
    assert f"removed .plots.{GONE}.a1b2c3d4.tmp, left by process {GONE}" in caplog.text


def test_under_torchrun_rank_0_alone_sweeps(checkout: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "1")
    main("pretrain", lambda params: None, argv=[])
    assert len(_leftovers(checkout)) == 4


WRITER = """\
import os, signal, sys
from pathlib import Path

from gpt1.atomic import atomic_dir
from tasks.stage import main

name = sys.argv[1]


def run(params):
    with atomic_dir(Path("out") / name) as tmp:
        (tmp / "knobs.yaml").write_text(Path("knobs.yaml").read_text())
        if os.environ.get("KILL") == name:
            os.kill(os.getpid(), signal.SIGKILL)


main(name, run, argv=[])
"""

PIPELINE = """\
stages:
  a:
    cmd: python write.py a
    params:
      - knobs.yaml:
          - p
    outs:
      - out/a
  b:
    cmd: python write.py b
    params:
      - knobs.yaml:
          - q
    outs:
      - out/b
"""


@pytest.mark.e2e
def test_killed_then_restored_from_the_run_cache_the_next_stage_sweeps(tmp_path: Path) -> None:
    """Stage a killed by kill -9 mid-write, then restored by `dvc repro` from DVC's run cache
    (its writer never runs again): stage b, which runs in that repro, sweeps a's temporary."""
    (tmp_path / "write.py").write_text(WRITER)
    (tmp_path / "dvc.yaml").write_text(PIPELINE)
    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    env = {"PYTHONPATH": str(REPO)}
    dvc("init", "--no-scm", "-q", cwd=tmp_path)

    def repro(p: int, q: int, kill: str = "") -> str:
        (tmp_path / "knobs.yaml").write_text(f"p: {p}\nq: {q}\n")
        proc = run([sys.executable, "-m", "dvc", "repro"], tmp_path,
                   env={**env, "KILL": kill}, check=not kill)
        return proc.stdout + proc.stderr

    repro(1, 1)
    repro(2, 1)  # the run cache now holds a's outputs for p 1 and for p 2; dvc.lock p 2
    repro(3, 1, kill="a")
    [left] = [p.name for p in (tmp_path / "out").iterdir() if p.name.startswith(".a.")]
    assert left.endswith(".tmp")
    output = repro(1, 2)
    assert "Stage 'a' is cached - skipping run" in output, output
    assert _names(tmp_path / "out") == ["a", "b"], output
    assert (tmp_path / "out/a/knobs.yaml").read_text() == "p: 1\nq: 1\n"


def test_a_writer_still_sweeps_its_own_output(tmp_path: Path) -> None:
    """The atomic helper's own clean-up, for an output run again, is unchanged."""
    _leave(tmp_path / f".out.{GONE}.k3j2h1g0.tmp", folder=True)
    _leave(tmp_path / f".other.{GONE}.k3j2h1g0.tmp")  # another output's: the runner's to sweep
    with atomic_dir(tmp_path / "out") as tmp:
        (tmp / "v.txt").write_text("new")
    assert _names(tmp_path) == sorted(["out", f".other.{GONE}.k3j2h1g0.tmp"])
