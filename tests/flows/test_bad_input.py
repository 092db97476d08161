"""A flow run that meets bad input fails at once, saying why: the stage is not retried; a bug
keeps its traceback and is retried. Before any run, `python -m flows.<flow>` refuses an unknown
argument or task, and a Prefect server that does not answer or refuses the auth string, in one
line (exit 2); a run whose server stops answering ends soon after its last stage, in one line."""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from flows import cli
from flows.dag import run_order
from flows.serve import start_server, stop_server
from gpt1.config import ServerParams, read_yaml
from gpt1.errors import InputError
from tests.conftest import REPO, copy_repo, edit_params, free_port, run

pytestmark = pytest.mark.e2e


def test_bad_input_fails_the_flow_without_retries(tmp_path: Path) -> None:
    """As a user first runs it: no PREFECT_API_URL, so the flow starts Prefect's temporary
    server (the other flow tests share one server, `prefect_api`, for speed)."""
    repo = copy_repo(tmp_path / "repo")
    lock = repo / "dvc.lock"  # there when the checkout copied has run the pipeline
    lock_before = _locked_but_code(lock)
    edit_params(repo, **{"ingest.corpus": ["missing/*.txt"], "flows.retries": 2,
                         "flows.retry_delay_seconds": 0})
    proc = run([sys.executable, "-m", "flows.full_pipeline"], repo, check=False,
               env={"PREFECT_HOME": str(tmp_path / "prefect"), "PREFECT_API_URL": ""})
    log = proc.stdout + proc.stderr
    assert proc.returncode != 0, log
    assert log.count("Running stage 'ingest'") == 1, log  # run once, not retried
    why = "no corpus file under gpt1/sample_data matches ingest.corpus ['missing/*.txt']"
    failed = f"StageFailed: stage ingest failed with exit code 2: {why}"
    assert "Task run 'ingest' - Finished in state Failed(" in log, log
    assert f"Task run encountered an exception {failed}" in log, log  # the task run's state
    assert f"Flow run encountered an exception: {failed}" in log, log  # the flow run's
    # and the command's own word: bad input, in one line (exit 2), before Prefect stops its
    # temporary server
    assert proc.returncode == 2, log
    assert f"error: {failed.removeprefix('StageFailed: ')}" in proc.stderr.splitlines(), log
    order = run_order(repo)
    assert order[:2] == ["code", "ingest"]
    assert "Task run 'code' - Finished in state Completed()" in log, log  # the one before
    for later in order[2:]:
        assert f"Task run '{later}'" not in log, log
    # DVC recorded nothing of ingest or after it (stage code, which ran, aside)
    assert _locked_but_code(lock) == lock_before


def _locked_but_code(lock: Path) -> dict | None:
    """dvc.lock's record of every stage but `code` (None: no dvc.lock)."""
    if not lock.exists():
        return None
    raw = read_yaml(lock.read_text(encoding="utf-8"))
    return {**raw, "stages": {k: v for k, v in raw.get("stages", {}).items() if k != "code"}}


def test_a_bug_keeps_its_traceback_and_is_retried(tmp_path: Path, prefect_api: str) -> None:
    """A ValueError from inside a stage's code (injected into the copy's ingest) is a bug: its
    traceback reaches the flow's log, it exits 1, and the flow retries it once (flows.retries)."""
    repo = copy_repo(tmp_path / "repo")
    stage = repo / "tasks" / "ingest.py"
    source = stage.read_text()
    assert source.count("\ndef run(") == 1
    head, _, rest = source.partition("\ndef run(")
    signature, _, body = rest.partition("\n")
    stage.write_text(f"{head}\ndef run({signature}\n    raise ValueError('an injected bug')\n"
                     f"{body}")
    edit_params(repo, **{"flows.retries": 1, "flows.retry_delay_seconds": 0})
    proc = run([sys.executable, "-m", "flows.full_pipeline"], repo, check=False,
               env={"PREFECT_HOME": str(tmp_path / "prefect"), "PREFECT_API_URL": prefect_api})
    log = proc.stdout + proc.stderr
    assert proc.returncode != 0, log
    assert log.count("Running stage 'ingest'") == 2, log  # run, then retried once
    assert log.count("ValueError: an injected bug") == 2, log  # each run's traceback
    assert "Traceback (most recent call last)" in log, log
    failed = "StageFailed: stage ingest failed with exit code 1: ValueError('an injected bug')"
    assert f"Flow run encountered an exception: {failed}" in log, log


# -- before the run: the command line and the server ------------------------------------------

AUTH = "gpt1:a-team-secret-of-32-characters"  # the auth server's, as `gpt1 team env` makes one


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Prefect server that asks for `AUTH`, as a team's does (its own: the shared one asks for
    none); its API URL. Stopped when the module's tests are done."""
    home = tmp_path_factory.mktemp("auth-server")
    server, api_url = start_server(home, ServerParams(host="127.0.0.1", port=free_port()),
                                   {"PREFECT_SERVER_API_AUTH_STRING": AUTH})
    try:
        yield api_url
    finally:
        stop_server(server)


def _closed_url() -> str:
    """An API URL where nothing listens: a flow that ignored it would fail at once, not start a
    temporary server."""
    return f"http://127.0.0.1:{free_port()}/api"


def _flow(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    """`python -m flows.<args>` in `cwd` (the flows imported from this checkout)."""
    return run([sys.executable, "-m", *args], cwd, check=False, timeout=120,
               env={"PYTHONPATH": str(REPO), "PREFECT_API_AUTH_STRING": "", **env})


def _one_line(proc: subprocess.CompletedProcess, starts: str) -> str:
    """The one line a refused command printed on stderr, which starts with `starts`."""
    output = proc.stdout + proc.stderr
    assert proc.returncode == 2, output
    assert "Traceback" not in output, output
    assert proc.stderr.startswith(starts) and proc.stderr.count("\n") == 1, output
    return proc.stderr


@pytest.mark.parametrize("args", [
    ["flows.full_pipeline", "--force"], ["flows.finetune", "sst2", "--forced"],
    ["flows.predict", "sst2", "new.csv", "--output", "x"], ["flows.serve", "--port", "4300"],
    ["flows.sweep", "sst2", "lr=0.1", "--parallel", "2"],
], ids=["full_pipeline", "finetune", "predict", "serve", "sweep"])
def test_an_unknown_argument_is_refused(tmp_path: Path, args: list[str]) -> None:
    """`python -m flows.full_pipeline --force` ran the whole pipeline, unforced."""
    proc = _flow(args, tmp_path, PREFECT_API_URL=_closed_url())
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"python -m {args[0]}: error: unrecognized arguments: " in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("args", [["flows.finetune", "nonexistent"],
                                  ["flows.predict", "nonexistent", "new.csv"],
                                  ["flows.sweep", "nonexistent", "lr=0.1"]],
                         ids=["finetune", "predict", "sweep"])
def test_an_unknown_task_is_one_line_before_any_run(tmp_path: Path, args: list[str]) -> None:
    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    proc = _flow(args, tmp_path, PREFECT_API_URL=_closed_url())
    line = _one_line(proc, "error: task 'nonexistent': not in the task registry of params.yaml "
                           "(tasks: ")
    assert "sst2" in line


@pytest.mark.parametrize("flow", ["finetune", "predict"])
@pytest.mark.parametrize("task", ["../x", "a/b", "", "sst2/../sst2", "sst2 "])
def test_a_task_named_as_a_path_or_not_at_all_is_refused_by_the_flow_itself(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flow: str, task: str) -> None:
    """What a deployment's caller may send as `task` (the UI, `prefect deployment run`), which
    no command line checked: the flow refuses it in one line listing the registry's tasks
    before it makes a path of it (`scored/<task>/`, `finetune@<task>`); nothing is written."""
    from flows.finetune import finetune
    from flows.predict import predict

    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError) as info:
        if flow == "predict":
            predict.fn(task, "new.csv")
        else:
            finetune.fn(task)
    registry = ", ".join(read_yaml((REPO / "params.yaml").read_text())["tasks"])
    assert str(info.value) == (f"task {task!r}: not in the task registry of params.yaml "
                               f"(tasks: {registry})")
    assert os.listdir(tmp_path) == ["params.yaml"]


def test_a_server_that_does_not_answer_is_one_line_naming_prefect_api_url(
        tmp_path: Path) -> None:
    url = _closed_url()
    proc = _flow(["flows.full_pipeline"], tmp_path, PREFECT_API_URL=url)
    line = _one_line(proc, f"error: PREFECT_API_URL={url}: no Prefect server answers there (")
    assert "unset PREFECT_API_URL to run on a temporary local server" in line


def test_a_silent_server_is_given_up_on_within_the_timeout(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A port that takes connections and never answers: refused after CHECK_TIMEOUT_SECONDS."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    monkeypatch.setattr(cli, "CHECK_TIMEOUT_SECONDS", 2)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/api"
        started = time.monotonic()
        with temporary_settings({PREFECT_API_URL: url}), \
                pytest.raises(InputError, match=f"PREFECT_API_URL={url}: no Prefect server "
                                                "answers there .*after 2 s"):
            cli.check_server()
    assert time.monotonic() - started < 10


def test_a_wrong_or_missing_auth_string_is_one_line_naming_it(tmp_path: Path,
                                                               auth_server: str) -> None:
    """Against a server that asks for one: which setting to fix, not a 401 traceback."""
    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    for auth, what in (("gpt1:not-the-team-secret-at-all", "refuses it"),
                       ("", "requires it, and it is not set")):
        proc = _flow(["flows.finetune", "sst2"], tmp_path, PREFECT_API_URL=auth_server,
                     PREFECT_API_AUTH_STRING=auth)
        line = _one_line(proc, f"error: PREFECT_API_AUTH_STRING: the Prefect server at "
                               f"{auth_server} {what} (401 Unauthorized): set it to ")
        assert "not-the-team-secret" not in line  # never the secret
    # flows.serve (a team's workers' deployments) checks as the flows do
    proc = _flow(["flows.serve"], tmp_path, PREFECT_API_URL=auth_server,
                 PREFECT_API_AUTH_STRING="gpt1:not-the-team-secret-at-all")
    _one_line(proc, f"error: PREFECT_API_AUTH_STRING: the Prefect server at {auth_server} "
                    "refuses it (401 Unauthorized): set it to ")
    # the server itself, asked with a wrong string or none: 401 and nothing but that, whatever
    # the request (the refusal says nothing of the secret, the runs or the server)
    wrong = base64.b64encode(b"gpt1:not-the-team-secret-at-all").decode()
    for headers in ({}, {"Authorization": f"Basic {wrong}"}, {"Authorization": "Basic ="}):
        for path, data in (("/admin/version", None), ("/flow_runs/filter", b"{}"),
                           ("/deployments/filter", b"{}")):
            request = urllib.request.Request(f"{auth_server}{path}", data=data,
                                              headers={"Content-Type": "application/json",
                                                       **headers})
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(request, timeout=30)
            assert refused.value.code == 401, (path, headers)
            assert json.loads(refused.value.read()) == {"exception_message": "Unauthorized"}
    # the API's address without its /api: a 404, said so
    proc = _flow(["flows.full_pipeline"], tmp_path, PREFECT_API_URL=auth_server[:-4],
                 PREFECT_API_AUTH_STRING=AUTH)
    _one_line(proc, f"error: PREFECT_API_URL={auth_server[:-4]}: answers, but has no Prefect "
                    "API there (404 on /admin/version)")
    from prefect.settings import PREFECT_API_AUTH_STRING, PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: auth_server, PREFECT_API_AUTH_STRING: AUTH}):
        cli.check_server()  # the right one passes


# -- during the run: the server goes away ------------------------------------------------------


class Cable:
    """A TCP forwarder to `port` on 127.0.0.1 that can be cut: `cut()` closes its port and every
    connection through it, as if the server behind it were killed."""

    def __init__(self, port: int) -> None:
        self.target = ("127.0.0.1", port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.ends: list[socket.socket] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                near, _ = self.listener.accept()
                far = socket.create_connection(self.target)
            except OSError:  # cut
                return
            with self.lock:
                self.ends += [near, far]
            for source, sink in ((near, far), (far, near)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):  # cut
            while data := source.recv(65536):
                sink.sendall(data)
            sink.shutdown(socket.SHUT_WR)

    def cut(self) -> None:
        self.listener.close()
        with self.lock:
            for end in self.ends:
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)
                end.close()


def test_a_run_whose_server_stops_answering_ends_soon_in_one_line(tmp_path: Path,
                                                                  auth_server: str) -> None:
    """The server goes away while the first stage waits (for DVC's lock, which this test holds);
    the stage then runs and the flow, unable to record its end, stops within seconds, not after
    minutes of Prefect's retries, and says why in its last line (exit 1: not bad input)."""
    repo = copy_repo(tmp_path / "repo")
    edit_params(repo, **{"ingest.corpus": ["missing/*.txt"], "flows.retries": 0,
                         "flows.lock_timeout_seconds": 120})
    cable = Cable(int(auth_server.rsplit(":", 1)[1].split("/")[0]))
    url = f"http://127.0.0.1:{cable.port}/api"
    out, err = tmp_path / "flow.out", tmp_path / "flow.err"

    def said() -> str:
        return out.read_text() + err.read_text()

    (repo / ".dvc" / "tmp").mkdir(parents=True, exist_ok=True)
    with open(repo / ".dvc" / "tmp" / "lock", "a+") as dvc_lock, open(out, "w") as stdout, \
            open(err, "w") as stderr:
        fcntl.flock(dvc_lock, fcntl.LOCK_EX)  # as a `dvc repro` typed by hand would
        dvc_lock.write(str(os.getpid()))
        dvc_lock.flush()
        path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
        flow = subprocess.Popen([sys.executable, "-m", "flows.full_pipeline"], cwd=repo,
                                stdout=stdout, stderr=stderr,
                                env={**os.environ, "PATH": path, "PREFECT_API_URL": url,
                                     "PREFECT_API_AUTH_STRING": AUTH,
                                     "PREFECT_HOME": str(tmp_path / "prefect")})
        deadline = time.monotonic() + 120
        while "waiting for DVC" not in said():
            assert flow.poll() is None and time.monotonic() < deadline, said()
            time.sleep(0.2)
        cable.cut()
        fcntl.flock(dvc_lock, fcntl.LOCK_UN)
        cut = time.monotonic()
        try:
            flow.wait(timeout=150)
        except subprocess.TimeoutExpired:
            flow.kill()
            flow.wait()
            pytest.fail(f"the flow still ran 150 s after its server went away:\n{said()}")
    seconds = time.monotonic() - cut
    last = err.read_text().strip().splitlines()[-1]
    assert flow.returncode == 1, said()
    assert "Running stage 'code'" in said()  # the first stage ran, then the flow ended
    assert last.startswith(f"error: the Prefect server at PREFECT_API_URL={url} stopped "
                           "answering during the run ("), said()
    assert last.endswith("the stages it completed are recorded in dvc.lock: start the server "
                         "again and re-run the flow"), last
    assert seconds < 60, f"{seconds:.0f} s after the server went away"
