"""A team's Prefect, as the README's "Prefect for a team" sets it up: the OS PostgreSQL behind
the server (`gpt1 team`), the process work pool `gpt1`, prefect.yaml's deployments registered
with `prefect deploy`, and two workers on one checkout. Each flow run is executed once, by one
worker, and runs on the checkout still take turns."""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import psutil
import pytest

from flows.dag import run_order
from flows.serve import start_server, stop_server
from gpt1 import team as pg
from gpt1.config import ServerParams
from tests.conftest import (
    Reproduced,
    dvc,
    edit_params,
    free_port,
    run,
    shared_sst2,
    skip_outside_ci,
)
from tests.flows.test_full_pipeline import group_gone

pytestmark = [pytest.mark.e2e, pytest.mark.heavy]

BIN = Path(sys.executable).parent
HOST = "127.0.0.1"
POOL = "gpt1"
WORKERS = ("worker-a", "worker-b")
FLOW_RUN_ID = re.compile(r"UUID: ([0-9a-f-]{36})")
DONE = "Flow run finished successfully in 'Completed'"


def wait_for(condition: Callable[[], object], what: str, timeout: float = 120) -> object:
    """Poll `condition` until it returns something truthy, and return that; fail after
    `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not (result := condition()):
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} after {timeout} s")
        time.sleep(0.5)
    return result


def when(timestamp: str) -> datetime:
    return datetime.fromisoformat(timestamp)


def gone(pid: int) -> bool:
    """No process `pid` is left but, at most, a zombie its parent has yet to reap."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.fixture()
def postgres() -> Iterator[str]:
    """A throwaway cluster of the OS PostgreSQL on a free port, started by gpt1.team; its
    connection URL. Stopped afterwards, and its postmaster checked gone."""
    try:
        pg.postgres_bin()
    except pg.PostgresNotFound as err:
        skip_outside_ci(str(err))
    # not in tmp_path: as root, PostgreSQL runs as `postgres`, which cannot enter pytest's 0700
    # base directory
    root = Path(tempfile.mkdtemp(prefix="gpt1-pg-"))
    root.chmod(0o755)
    cluster = root / "db"
    try:
        url = pg.start(cluster, free_port())
        postmaster = pg.pid(cluster)
        assert postmaster is not None
        yield url
    finally:
        pg.stop(cluster)
        shutil.rmtree(root)
    assert gone(postmaster), f"PostgreSQL (pid {postmaster}) outlived pg_ctl stop"


def exported(printed: str) -> dict[str, str]:
    """The `export NAME=value` lines of what `gpt1 team env` printed, as a mapping."""
    return {name: shlex.split(value)[0] for name, value in
            re.findall(r"^export ([A-Z_]+)=(.+)$", printed, re.MULTILINE)}


@dataclass
class Team:
    """The tiny repo, registered with a PostgreSQL-backed server that two workers poll."""

    repo: Path
    env: dict[str, str]
    logs: Path
    csrf: dict[str, str] = field(default_factory=dict)

    def headers(self, post: bool) -> dict[str, str]:
        """The auth string, as every client sends it; for a POST, a CSRF token too, as
        Prefect's clients fetch one from a server that checks them."""
        auth = base64.b64encode(self.env["PREFECT_API_AUTH_STRING"].encode()).decode()
        headers = {"Content-Type": "application/json", "Authorization": f"Basic {auth}"}
        if post:
            if not self.csrf:
                client = str(uuid.uuid4())
                request = urllib.request.Request(
                    f"{self.env['PREFECT_API_URL']}/csrf-token?client={client}",
                    headers=headers)
                with urllib.request.urlopen(request, timeout=30) as response:
                    token = json.load(response)["token"]
                self.csrf.update({"Prefect-Csrf-Token": token, "Prefect-Csrf-Client": client})
            headers.update(self.csrf)
        return headers

    def prefect(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return run([str(BIN / "prefect"), *args], self.repo, env=self.env, check=check,
                   timeout=300)

    def api(self, path: str, body: dict | None = None) -> object:
        """GET `path` of the server's REST API, or POST `body` to it."""
        request = urllib.request.Request(
            f"{self.env['PREFECT_API_URL']}{path}", method="GET" if body is None else "POST",
            data=None if body is None else json.dumps(body).encode(),
            headers=self.headers(post=body is not None))
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.load(response)

    def trigger(self, deployment: str, name: str) -> tuple[subprocess.Popen, str]:
        """`prefect deployment run <deployment> --watch`, running; and the flow run's id."""
        log = self.logs / f"{name}.log"
        with open(log, "w") as out:
            proc = subprocess.Popen([str(BIN / "prefect"), "deployment", "run", deployment,
                                     "--watch"], cwd=self.repo, env={**os.environ, **self.env},
                                    stdout=out, stderr=subprocess.STDOUT, text=True)
        found = wait_for(lambda: FLOW_RUN_ID.search(log.read_text()) or proc.poll() is not None,
                         f"flow run id from `prefect deployment run` ({log})", timeout=120)
        if not isinstance(found, re.Match):
            pytest.fail(f"prefect deployment run exited {proc.returncode}:\n{log.read_text()}")
        return proc, found.group(1)

    def finish(self, proc: subprocess.Popen, name: str, flow_run: str) -> str:
        """What `--watch` printed, once it has exited 0; else fail with the flow run's log,
        which `--watch` does not show."""
        proc.wait(timeout=600)
        shown = (self.logs / f"{name}.log").read_text()
        if proc.returncode != 0 or DONE not in shown:
            logged = self.api("/logs/filter", {"logs": {"flow_run_id": {"any_": [flow_run]}},
                                               "sort": "TIMESTAMP_ASC", "limit": 200})
            lines = "\n".join(f"{entry['timestamp']} {entry['message']}" for entry in logged)
            pytest.fail(f"{name} exited {proc.returncode}:\n{shown}\nits flow run logged:\n{lines}")
        return shown

    def task_runs(self, flow_run: str) -> list[dict]:
        return self.api("/task_runs/filter", {"flow_runs": {"id": {"any_": [flow_run]}},
                                              "sort": "EXPECTED_START_TIME_ASC", "limit": 200})

    def worker_events(self, flow_run: str, event: str) -> list[str]:
        """The workers that emitted `prefect.worker.<event>` about `flow_run`."""
        found = self.api("/events/filter", {"filter": {
            "any_resource": {"id": [f"prefect.flow-run.{flow_run}"]},
            "event": {"name": [f"prefect.worker.{event}"]}}, "limit": 50})
        return [e["resource"]["prefect.resource.id"].removeprefix("prefect.worker.process.")
                for e in found["events"]]

    def run_logs(self, flow_run: str) -> list[str]:
        logs = self.api("/logs/filter", {"logs": {"flow_run_id": {"any_": [flow_run]}},
                                         "sort": "TIMESTAMP_ASC", "limit": 200})
        return [entry["message"] for entry in logs]


def stop_worker(proc: subprocess.Popen) -> None:
    """Ctrl-C to a worker's process group (a worker ignores SIGTERM while the server is
    unreachable), SIGKILL to it after 30 s."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture()
def team(reproduced: Reproduced, tmp_path: Path, postgres: str) -> Iterator[Team]:
    """A Prefect server on `postgres`, the pool, the deployments of the copy's prefect.yaml,
    and two process workers for a copy of the reproduced pipeline cut to SST-2; afterwards
    each is stopped by PID and checked gone."""
    tiny_repo = reproduced.repo
    shared_sst2(tiny_repo)
    edit_params(tiny_repo, **{"flows.retries": 0})
    home = tmp_path / "prefect"
    port = free_port()
    # the team recipe's settings (docs/scaling.md): the server's, and every client's
    printed = run([sys.executable, "-m", "gpt1.cli", "team", "env",
                   "--url", f"http://{HOST}:{port}", "--auth-file", str(tmp_path / "auth")],
                  tiny_repo).stdout
    settings = exported(printed)
    clients = {name: settings.pop(name) for name in ("PREFECT_API_URL", "PREFECT_API_AUTH_STRING")}
    assert settings["PREFECT_SERVER_API_AUTH_STRING"] == clients["PREFECT_API_AUTH_STRING"]
    server, api_url = start_server(home, ServerParams(host=HOST, port=port),
                                   {"PREFECT_API_DATABASE_CONNECTION_URL": postgres, **settings})
    assert api_url == clients["PREFECT_API_URL"]
    env = {**clients, "PREFECT_HOME": str(home),
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PREFECT_WORKER_QUERY_SECONDS": "1",
           # dvc.yaml's commands run `python`: this interpreter's
           "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    workers: list[subprocess.Popen] = []
    try:
        team = Team(tiny_repo, env, tmp_path)
        team.prefect("work-pool", "create", POOL, "--type", "process")
        deployed = team.prefect("deploy", "--all", "--no-prompt")
        for name in ("full-pipeline/team", "finetune/team", "predict/team", "sweep/team"):
            assert f"Deployment '{name}' successfully created" in deployed.stdout, deployed.stdout
            # the checkout is each worker's: named by its environment when a run starts
            pull = team.api(f"/deployments/name/{name}")["pull_steps"]
            assert "{{ $GPT1_CHECKOUT }}" in json.dumps(pull), pull
        for name in WORKERS:
            with open(tmp_path / f"{name}.log", "w") as out:
                # started outside the checkout: the deployments' pull step finds it
                workers.append(subprocess.Popen(
                    [str(BIN / "prefect"), "worker", "start", "--pool", POOL, "--name", name],
                    cwd=tmp_path, env={**os.environ, **env, "GPT1_CHECKOUT": str(tiny_repo)},
                    stdout=out,
                    stderr=subprocess.STDOUT, start_new_session=True))
        wait_for(lambda: {w["name"] for w in team.api(
            f"/work_pools/{POOL}/workers/filter",
            {"workers": {"status": {"any_": ["ONLINE"]}}, "limit": 10, "offset": 0})}
            == set(WORKERS), "two online workers")
        yield team
    finally:
        for proc in workers:
            stop_worker(proc)
        stop_server(server)
        for proc in [*workers, server]:
            assert group_gone(proc.pid), f"{proc.args} left processes in its group behind"


@pytest.mark.long
def test_two_workers_run_each_flow_run_once_and_take_turns_on_a_checkout(team: Team) -> None:
    # the server answers no one without the auth string (its health check aside), and takes no
    # POST without a CSRF token
    api = team.env["PREFECT_API_URL"]
    for request, refused in (
            (urllib.request.Request(f"{api}/admin/version"), 401),
            (urllib.request.Request(f"{api}/flow_runs/filter", data=b"{}", method="POST",
                                    headers=team.headers(post=False)), 403)):
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(request, timeout=30)
        assert err.value.code == refused
    assert team.api("/admin/version")
    assert team.api("/flow_runs/filter", {"limit": 1}) == []
    first, first_id = team.trigger("full-pipeline/team", "first")
    # the run takes the checkout's lock before its first stage: once that exists, it holds it
    wait_for(lambda: team.task_runs(first_id), "task run of the first flow run", timeout=180)
    second, second_id = team.trigger("full-pipeline/team", "second")
    team.finish(first, "first", first_id)
    team.finish(second, "second", second_id)
    assert "Data and pipelines are up to date." in dvc("status", cwd=team.repo).stdout

    worker_logs = {name: (team.logs / f"{name}.log").read_text() for name in WORKERS}
    for flow_run in (first_id, second_id):
        run = team.api(f"/flow_runs/{flow_run}")
        assert run["state_type"] == "COMPLETED" and run["run_count"] == 1, run
        states = [s["type"] for s in team.api(f"/flow_run_states/?flow_run_id={flow_run}")]
        assert states.count("RUNNING") == 1 and states.count("COMPLETED") == 1, states
        # the workers' own events, and their logs, name one worker that took it, once
        submitted = wait_for(lambda r=flow_run: team.worker_events(r, "submitted-flow-run"),
                             f"worker event for flow run {flow_run}")
        executed = wait_for(lambda r=flow_run: team.worker_events(r, "executed-flow-run"),
                            f"worker event for flow run {flow_run}")
        assert len(submitted) == 1 and submitted == executed, (submitted, executed)
        # Both workers may claim a run in the same poll: the server lets one move it to
        # PENDING and aborts the other's claim, so no worker but the one that ran it goes on
        claimed = [name for name, log in worker_logs.items()
                   if f"submitting flow run '{flow_run}'" in log]
        aborted = [name for name, log in worker_logs.items()
                   if f"Aborted submission of flow run '{flow_run}'" in log]
        assert sorted(set(claimed) - set(aborted)) == submitted, worker_logs
        assert set(aborted) <= set(claimed) - set(submitted), worker_logs

    # The two runs overlapped, but not their stages: the second waited for the first's lock...
    first_name = team.api(f"/flow_runs/{first_id}")["name"]
    second_logs = team.run_logs(second_id)
    assert any(f"waiting for flow run full-pipeline/{first_name} (pid " in message
               for message in second_logs), second_logs
    first_tasks, second_tasks = team.task_runs(first_id), team.task_runs(second_id)
    assert max(when(t["end_time"]) for t in first_tasks) <= \
        min(when(t["start_time"]) for t in second_tasks)
    # ...then found every stage up to date
    stages = run_order(team.repo)
    assert [t["name"] for t in second_tasks][:len(stages)] == stages
    assert "stages run: none" in second_logs
