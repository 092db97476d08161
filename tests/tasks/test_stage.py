"""tasks.stage: the shell every stage runs in — bad input in one line with exit code 2, bugs with
their traceback, the verdict the flows read, and params that change under a running stage fail
it rather than reach dvc.lock.

tasks.stage's verdicts: what the user gave (params.yaml, the data root, a release folder) is
bad input when it is wrong, even when it breaks while the stage runs; a file the program itself
needs that is missing is a bug (a traceback, verdict `bug`, retried), not bad input."""

from __future__ import annotations

import datetime
import errno
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from dvc.repo import Repo

from gpt1.config import Params
from gpt1.errors import DataFormatError, InputError, MissingInputError, is_input_error
from gpt1.presets.edit import nest, update_params
from gpt1.training.divergence import TrainingDiverged
from tasks.params_guard import declared, params_files
from tasks.stage import (
    checkout_commit,
    main,
    record_path,
    user_paths,
    verdict_path,
    write_stage_record,
)
from tests.conftest import REPO, run
from tests.stage_shell import run_stage


def test_declared_params_are_what_dvc_resolves_for_every_stage_form() -> None:
    """Read against dvc.yaml's text: a plain stage, a foreach cell (${item}), a matrix cell
    (${item.task})."""
    assert declared(REPO, "pretrain")["params"] == {"params.yaml": ["model", "pretrain"]}
    assert declared(REPO, "finetune@sst2")["params"] == {
        "params.yaml": ["finetune.seeds", "finetune.train"]}
    ablation = declared(REPO, "ablation@no_aux-sst2")["params"]["params.yaml"]
    assert {"analysis.ablation.tasks.sst2", "finetune.train"} <= set(ablation)
    assert not any("$" in key or "None" in key for key in ablation)


def test_a_param_changed_while_the_stage_ran_fails_it(stage_dir: Path,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    def edit_mid_run(params: Params) -> None:
        assert params.pretrain.max_steps == 800  # what the stage trains with (params.yaml)
        update_params(Path("params.yaml"), nest({"pretrain.max_steps": 500}))

    assert run_stage(edit_mid_run, caplog) == 2
    assert ("stage pretrain failed: params.yaml: pretrain changed while the stage ran; its "
            "outputs were made with the values it read at the start") in caplog.text


def test_a_param_the_stage_does_not_read_may_change(stage_dir: Path,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    def edit_other(params: Params) -> None:
        update_params(Path("params.yaml"), nest({"flows.retries": 3, "finetune.seeds": [1, 2]}))

    assert run_stage(edit_other, caplog) == 0
    assert "stage pretrain done" in caplog.text


def _verdict(stage_dir: Path, address: str = "pretrain") -> dict[str, str]:
    return json.loads(verdict_path(stage_dir, address).read_text())


@pytest.mark.parametrize(("error", "message"), [
    (OSError(errno.ENOSPC, "No space left on device", "artifacts/x.pt"),
     "no space left on device writing artifacts/x.pt: free some space and run it again"),
    (OSError(errno.EACCES, "Permission denied", "data/raw"), "[Errno 13] Permission denied: "
                                                            "'data/raw'"),
    (TrainingDiverged("pretrain: the loss became nan at step 3"),
     "pretrain: the loss became nan at step 3"),
    (DataFormatError("x.tsv:3: bad label"), "x.tsv:3: bad label"),
])
def test_bad_input_is_one_line_and_exit_2(stage_dir: Path, caplog: pytest.LogCaptureFixture,
                                          error: Exception, message: str) -> None:
    def fail(params: Params) -> None:
        raise error

    assert run_stage(fail, caplog) == 2
    assert f"stage pretrain failed: {message}" in caplog.text
    assert _verdict(stage_dir) == {"stage": "pretrain", "verdict": "input_error",
                                   "message": message}


@pytest.mark.parametrize("error", [ValueError("zip() argument 2 is shorter than argument 1"),
                                   KeyError("oops"), AssertionError("invariant"),
                                   OSError(errno.EIO, "Input/output error"),
                                   FloatingPointError("overflow")])
def test_a_bug_keeps_its_traceback(stage_dir: Path, error: Exception) -> None:
    """Not the user's to fix: raised on (a traceback, exit 1 from Python), recorded as a bug."""
    def bug(params: Params) -> None:
        raise error

    with pytest.raises(type(error)) as raised:
        main("pretrain", bug, argv=[])
    assert raised.value is error
    assert _verdict(stage_dir) == {"stage": "pretrain", "verdict": "bug",
                                   "message": repr(error)}


def test_an_injected_bug_exits_1_with_its_traceback(tmp_path: Path) -> None:
    """Through the command a user types: a ValueError from deep inside a stage is a bug."""
    script = tmp_path / "stage.py"
    script.write_text("from tasks.stage import main\n\n"
                      "def run(params):\n    raise ValueError('an internal invariant')\n\n"
                      "main('pretrain', run)\n")
    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    proc = run([sys.executable, str(script)], tmp_path, env={"PYTHONPATH": str(REPO)},
               check=False)
    assert proc.returncode == 1
    assert "Traceback (most recent call last)" in proc.stderr
    assert proc.stderr.rstrip().endswith("ValueError: an internal invariant")
    assert "stage pretrain failed" not in proc.stderr


def test_record_paths_group_foreach_and_matrix_stages() -> None:
    assert record_path("ingest") == Path("metrics/stages/ingest.json")
    assert record_path("finetune@sst2") == Path("metrics/stages/finetune/sst2.json")
    assert record_path("ablation@no_pretrain-sst2") == Path(
        "metrics/stages/ablation/no_pretrain-sst2.json")


def test_a_stage_that_succeeds_records_its_time(stage_dir: Path,
                                                caplog: pytest.LogCaptureFixture) -> None:
    before = datetime.datetime.now(datetime.UTC).replace(microsecond=0)

    def slow(params: Params) -> None:
        time.sleep(0.3)

    assert run_stage(slow, caplog) == 0
    assert _verdict(stage_dir) == {"stage": "pretrain", "verdict": "ok", "message": ""}
    record = json.loads((stage_dir / "metrics/stages/pretrain.json").read_text())
    assert set(record) == {"stage", "seconds", "finished", "commit", "uncommitted_changes",
                           "params"}
    assert record["stage"] == "pretrain" and 0.3 <= record["seconds"] < 30
    finished = datetime.datetime.fromisoformat(record["finished"])
    assert before <= finished <= datetime.datetime.now(datetime.UTC)
    assert record["commit"] is None  # not a git checkout
    assert not list(stage_dir.glob("metrics/stages/.*"))  # written in place, nothing left over


def test_in_an_experiments_workspace_the_stage_works_where_dvc_runs_it(
        stage_dir: Path, tmp_path_factory: pytest.TempPathFactory,
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """`dvc exp run --temp` and queue workers run a stage in a workspace under .dvc/tmp/exps
    while DVC_ROOT names the checkout the experiment came from: the stage's guard, record and
    verdict are the workspace's, and the checkout is left alone (its guard looked the stage up
    there and failed with KeyError)."""
    origin = tmp_path_factory.mktemp("origin")
    monkeypatch.setenv("DVC_ROOT", str(origin))
    assert run_stage(lambda params: None, caplog) == 0
    assert _verdict(stage_dir) == {"stage": "pretrain", "verdict": "ok", "message": ""}
    assert json.loads((stage_dir / "metrics/stages/pretrain.json").read_text())["params"]
    assert list(origin.iterdir()) == []


def test_a_failed_stage_records_nothing(stage_dir: Path, caplog: pytest.LogCaptureFixture,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DVC_STAGE", "finetune@sst2")

    def fail(params: Params) -> None:
        raise DataFormatError("bad input")

    assert run_stage(fail, caplog) == 2
    assert not (stage_dir / "metrics").exists()


def test_run_outside_dvc_records_nothing(stage_dir: Path, caplog: pytest.LogCaptureFixture,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DVC_STAGE")
    assert run_stage(lambda params: None, caplog) == 0
    assert not (stage_dir / "metrics").exists()
    assert not verdict_path(stage_dir, "pretrain").exists()


def test_the_record_names_the_commit_and_code_changes(stage_dir: Path) -> None:
    git = ["git", "-c", "user.email=test@gpt1.local", "-c", "user.name=gpt1 tests"]
    (stage_dir / "code.py").write_text("x = 1\n")
    for cmd in (["git", "init", "-q"], [*git, "add", "-A"], [*git, "commit", "-qm", "c"]):
        subprocess.run(cmd, cwd=stage_dir, check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=stage_dir, capture_output=True,
                          text=True, check=True).stdout.strip()
    (stage_dir / "params.yaml").write_text((stage_dir / "params.yaml").read_text() + "\n")
    record = json.loads(write_stage_record("finetune@sst2", 1.25, stage_dir).read_text())
    assert record["commit"] == head and record["seconds"] == 1.2  # rounded to 0.1 s
    assert record["uncommitted_changes"] is False  # params.yaml is a run's to change
    (stage_dir / "code.py").write_text("x = 2\n")
    assert checkout_commit(stage_dir) == {"commit": head, "uncommitted_changes": True}


EDITING_STAGE = """\
import sys
from pathlib import Path

from gpt1.config import read_yaml
from gpt1.presets.edit import nest, update_params
from tasks.stage import main

address, key, value = sys.argv[1:]


def run(params):
    out = Path("out") / f"{address}.txt"
    out.parent.mkdir(exist_ok=True)
    out.write_text("made with the params read at the start\\n")
    update_params(Path("params.yaml"), nest({key: read_yaml(value)}))


main("edit", run, argv=[])
"""

EDITING_DVC_YAML = """\
stages:
  plain:
    cmd: python edit.py plain pretrain.lr 0.1
    params:
      - pretrain.lr
    outs:
      - out/plain.txt
  each:
    foreach: [sst2]
    do:
      cmd: python edit.py each@${item} analysis.transfer.tasks.${item} 300
      params:
        - analysis.transfer.tasks.${item}
      outs:
        - out/each@${item}.txt
  cell:
    matrix:
      variant: [full]
      task: [sst2]
    cmd: python edit.py cell@${item.variant}-${item.task} analysis.ablation.tasks.${item.task} [300]
    params:
      - analysis.ablation.tasks.${item.task}
    outs:
      - out/cell@${item.variant}-${item.task}.txt
"""


@pytest.mark.parametrize("address", ["plain", "each@sst2", "cell@full-sst2"])
def test_a_declared_param_changed_mid_run_fails_every_stage_form_under_dvc(
        tmp_path: Path, address: str) -> None:
    """Through `dvc repro`, for a plain stage, a foreach cell and a matrix cell: the change is
    caught (exit 2), DVC records nothing (no lock entry, no run-cache entry) and `dvc status`
    still shows the stage to run."""
    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    (tmp_path / "edit.py").write_text(EDITING_STAGE)
    (tmp_path / "dvc.yaml").write_text(EDITING_DVC_YAML)
    Repo.init(str(tmp_path), no_scm=True).close()
    env = {"PYTHONPATH": str(REPO)}
    proc = run([sys.executable, "-m", "dvc", "repro", "--single-item", address], tmp_path,
               env=env, check=False)
    assert proc.returncode != 0
    assert "changed while the stage ran" in proc.stderr + proc.stdout
    lock = tmp_path / "dvc.lock"
    assert not lock.exists() or address not in lock.read_text()
    runs = tmp_path / ".dvc" / "cache" / "runs"
    assert not runs.exists() or not any(runs.rglob("*"))
    assert json.loads(verdict_path(tmp_path, address).read_text())["verdict"] == "input_error"
    status = run([sys.executable, "-m", "dvc", "status", address], tmp_path, env=env)
    assert address in status.stdout


def test_the_record_holds_the_params_the_stage_ran_with(
        stage_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Each param the stage declares, with the value it read at its start: a param it does not
    declare may change meanwhile, and is not recorded."""
    def edit_other(params: Params) -> None:
        update_params(Path("params.yaml"), nest({"flows.retries": 3}))

    assert run_stage(edit_other, caplog) == 0
    record = json.loads((stage_dir / "metrics/stages/pretrain.json").read_text())
    ran_with = {(p["file"], p["key"]): p["value"] for p in record["params"]}
    assert set(ran_with) == {("params.yaml", "model"), ("params.yaml", "pretrain")}
    assert ran_with[("params.yaml", "pretrain")]["max_steps"] == 800


def test_the_params_files_are_the_default_and_those_a_stage_names(stage_dir: Path) -> None:
    assert params_files(stage_dir) == ["params.yaml"]
    (stage_dir / "dvc.yaml").write_text("stages:\n  s:\n    cmd: x\n    params:\n"
                                        "      - other.yaml:\n          - lr\n      - seed\n")
    assert params_files(stage_dir) == ["other.yaml", "params.yaml"]


INTERNAL = "/nonexistent/internal/cache.bin"




# -- params.yaml that breaks while the stage runs ----------------------------------------------


@pytest.mark.parametrize(("broken", "message"), [
    (b"model:\n  n_ctx: [64\n", "params.yaml:3:1: not valid YAML: "),
    (b"model:\n  n_ctx: 64\nmodel:\n  n_ctx: 32\n", 'params.yaml:3:1: not valid YAML: '
                                                    'while constructing a mapping'),
    (b"model: {n_ctx: 64} # caf\xe9\n", "params.yaml: not UTF-8 text (byte 24)"),
])
def test_params_broken_while_the_stage_ran_are_bad_input(stage_dir: Path, broken: bytes,
                                                         message: str,
                                                         caplog: pytest.LogCaptureFixture
                                                         ) -> None:
    def break_params(params: Params) -> None:
        Path("params.yaml").write_bytes(broken)

    assert run_stage(break_params, caplog) == 2
    assert f"stage pretrain failed: {message}" in caplog.text
    assert "it changed while the stage ran: mend it and run the stage again" in caplog.text
    verdict = _verdict(stage_dir)
    assert verdict["verdict"] == "input_error" and verdict["message"].startswith(message)
    assert not (stage_dir / "metrics/stages/pretrain.json").exists()


def test_params_not_utf8_at_the_start_are_bad_input(stage_dir: Path,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    (stage_dir / "params.yaml").write_bytes(b"model: {n_ctx: 64}  # caf\xe9\n")
    assert run_stage(lambda params: None, caplog) == 2
    assert "stage pretrain failed: params.yaml: not UTF-8 text (byte 25)" in caplog.text
    assert _verdict(stage_dir)["verdict"] == "input_error"


def test_a_dvc_yaml_not_yaml_is_bad_input(stage_dir: Path,
                                          caplog: pytest.LogCaptureFixture) -> None:
    (stage_dir / "dvc.yaml").write_text("stages:\n  s: [cmd\n")
    assert run_stage(lambda params: None, caplog) == 2
    assert "stage pretrain failed: dvc.yaml:3:1: not valid YAML" in caplog.text


# -- OSErrors: the user's paths, and the program's own ----------------------------------------


def test_a_missing_file_the_program_needs_is_a_bug(stage_dir: Path) -> None:
    """Neither the user's path nor wrapped as bad input where it is opened: a traceback, the
    verdict `bug` (which the flows retry)."""
    def needs_a_cache(params: Params) -> None:
        open(INTERNAL, "rb")  # noqa: SIM115 - it fails

    with pytest.raises(FileNotFoundError) as raised:
        main("pretrain", needs_a_cache, argv=[])
    assert raised.value.filename == INTERNAL
    assert _verdict(stage_dir) == {"stage": "pretrain", "verdict": "bug",
                                   "message": repr(raised.value)}


def test_an_output_folder_of_the_checkout_gone_missing_is_a_bug(stage_dir: Path) -> None:
    def write_into_nothing(params: Params) -> None:
        (stage_dir / "artifacts/nowhere/x.bin").write_bytes(b"")

    with pytest.raises(FileNotFoundError):
        main("pretrain", write_into_nothing, argv=[])
    assert _verdict(stage_dir)["verdict"] == "bug"


@pytest.mark.parametrize("opened", [
    "gpt1/sample_data/corpus/99_missing.txt",  # under the data root (ingest.root)
    "params.yaml/nested",  # the params file (ENOTDIR)
])
def test_a_path_the_user_gave_is_bad_input(stage_dir: Path, opened: str,
                                           caplog: pytest.LogCaptureFixture) -> None:
    def read_it(params: Params) -> None:
        Path(opened).read_text()

    assert run_stage(read_it, caplog) == 2
    assert "stage pretrain failed: [Errno " in caplog.text and opened in caplog.text
    assert _verdict(stage_dir)["verdict"] == "input_error"


def test_a_release_folder_named_in_params_is_the_users(stage_dir: Path,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    update_params(stage_dir / "params.yaml",
                  nest({"pretrain.source": "hf", "pretrain.source_dir": "releases/gpt"}))

    def import_it(params: Params) -> None:
        (Path(params.pretrain.source_dir) / "config.json").read_text()

    assert run_stage(import_it, caplog) == 2
    assert "releases/gpt/config.json" in caplog.text


def test_wrapped_where_it_is_opened_it_is_bad_input_wherever_it_lies(
        stage_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    def wrapped(params: Params) -> None:
        raise MissingInputError(f"{INTERNAL}: not found (run the pretrain stage first)")

    assert run_stage(wrapped, caplog) == 2
    assert f"stage pretrain failed: {INTERNAL}: not found (run the pretrain stage first)" in \
        caplog.text


def test_the_rule() -> None:
    given = [*user_paths(Path("params.yaml"), None), Path("data/root")]
    assert is_input_error(InputError("x"), given)
    assert is_input_error(MissingInputError("x: not found"), given)
    for code in (errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS):
        assert is_input_error(OSError(code, "x", INTERNAL), given)  # the machine's state
    for code in (errno.ENOENT, errno.ENOTDIR, errno.EISDIR):
        assert not is_input_error(OSError(code, "x", INTERNAL), given)
        assert is_input_error(OSError(code, "x", "data/root/books/a.txt"), given)
        assert is_input_error(OSError(code, "x", "./data/root"), given)
        assert not is_input_error(OSError(code, "x", "data/rootless/a.txt"), given)
        assert is_input_error(OSError(code, "x", INTERNAL, None, "params.yaml"), given)
        assert not is_input_error(OSError(code, "x"), given)  # names no file
        assert is_input_error(OSError(code, "x", INTERNAL))  # a command: all paths its user's
    assert not is_input_error(OSError(errno.EIO, "x", "data/root/a.txt"), given)
    assert not is_input_error(KeyError("run"), given)
