"""`python -m flows.serve` against a real Prefect server: its deployments run from the CLI; a
server address in use is refused before anything starts, an IPv6 one named as a URL writes it."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psutil
import pyarrow.parquet as pq
import pytest

from flows.dag import run_order
from flows.serve import PREFECT_HOME, SERVER_PID, ServerError, start_server
from gpt1.config import ServerParams, load_params
from gpt1.reporting.sections import TITLE
from tests.browser import chromium
from tests.conftest import (
    Reproduced,
    dvc,
    edit_params,
    free_port,
    run,
    shared_sst2,
    skip_outside_ci,
)

pytestmark = pytest.mark.e2e

BIN = Path(sys.executable).parent


def stop_tree(pid: int) -> None:
    """SIGTERM a process, then SIGKILL whatever of it and its children is left."""
    try:
        tree = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    os.kill(pid, signal.SIGTERM)
    _, alive = psutil.wait_procs(tree, timeout=60)
    for proc in alive:
        proc.kill()


class Served:
    """A running `python -m flows.serve` and the Prefect CLI pointed at its server."""

    def __init__(self, repo: Path, port: int, log: Path) -> None:
        self.repo, self.log = repo, log
        self.env = {"PREFECT_API_URL": f"http://127.0.0.1:{port}/api",
                    "PREFECT_HOME": str(repo / PREFECT_HOME),
                    "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}

    def prefect(self, *args: str, check: bool = True,
                timeout: float = 600) -> subprocess.CompletedProcess:
        return run([str(BIN / "prefect"), *args], self.repo, env=self.env, check=check,
                   timeout=timeout)

    def wait_for_deployments(self, proc: subprocess.Popen, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"flows.serve exited {proc.returncode}:\n{self.log.read_text()}")
            if all(self.prefect("deployment", "inspect", name, check=False,
                                timeout=60).returncode == 0
                   for name in ("full-pipeline/default", "finetune/default",
                                "predict/default", "sweep/default")):
                return
            time.sleep(1)
        pytest.fail(f"deployments not served in {timeout} s:\n{self.log.read_text()}")

    def artifact(self, key: str) -> dict:
        """The newest version of artifact `key`, from the server's REST API (3.8's
        `prefect artifact inspect` sends a filter its own server refuses)."""
        body = {"artifacts": {"key": {"any_": [key]}}, "sort": "CREATED_DESC", "limit": 1}
        request = urllib.request.Request(f"{self.env['PREFECT_API_URL']}/artifacts/filter",
                                         data=json.dumps(body).encode(), method="POST",
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            (artifact,) = json.load(response)
        return artifact


@pytest.fixture()
def served(reproduced: Reproduced, tmp_path: Path) -> Iterator[Served]:
    """flows.serve in a copy of the reproduced tiny pipeline cut to SST-2, starting its own
    server on a free port; afterwards every process it started is stopped, by PID."""
    tiny_repo = reproduced.repo
    shared_sst2(tiny_repo)
    port = free_port()
    edit_params(tiny_repo, **{"flows.server.port": port, "flows.retries": 0})
    log = tmp_path / "serve.log"
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
           "PREFECT_API_URL": "", "PREFECT_RUNNER_POLL_FREQUENCY": "1"}
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "flows.serve"], cwd=tiny_repo, env=env,
                                stdout=out, stderr=subprocess.STDOUT)
    served = Served(tiny_repo, port, log)
    try:
        served.wait_for_deployments(proc)
        yield served
    finally:
        pid_file = tiny_repo / PREFECT_HOME / SERVER_PID
        server_pid = int(pid_file.read_text()) if pid_file.is_file() else None
        stop_tree(proc.pid)
        proc.wait()
        if server_pid is not None:  # serve stops its server; make sure of it
            assert not psutil.pid_exists(server_pid) or \
                psutil.Process(server_pid).status() == psutil.STATUS_ZOMBIE, \
                f"the Prefect server (pid {server_pid}) outlived flows.serve"
            stop_tree(server_pid)


def mtimes(repo: Path) -> dict[str, int]:
    return {p.relative_to(repo).as_posix(): p.stat().st_mtime_ns
            for p in [*(repo / "metrics" / "finetune").glob("*.json"),
                      repo / "reports" / "summary.md"]}


def without_seconds(metrics: object) -> object:
    """`metrics` with every "seconds" entry (wall time, the one unseeded figure) removed."""
    if isinstance(metrics, dict):
        return {k: without_seconds(v) for k, v in metrics.items() if k != "seconds"}
    if isinstance(metrics, list):
        return [without_seconds(v) for v in metrics]
    return metrics


@pytest.mark.long
def test_deployments_run_from_the_cli(served: Served) -> None:
    repo = served.repo
    # the UI's pages call the API of the server flows.serve started, on its port: Prefect's
    # default is 127.0.0.1:4200 whatever the port
    ui = served.env["PREFECT_API_URL"].removesuffix("/api")
    with urllib.request.urlopen(f"{ui}/ui-settings", timeout=30) as response:
        assert json.load(response)["api_url"] == served.env["PREFECT_API_URL"]
    # the pipeline is up to date but for the held-out text's generated sample and the task
    # registry, cut to SST-2, which ingest reads: the full run brings them up to date alone,
    # with the report; every other stage DVC skips
    seed = load_params(repo / "params.yaml").lm_eval.sample.seed
    edit_params(repo, **{"lm_eval.sample.seed": seed + 1})
    full = served.prefect("deployment", "run", "full-pipeline/default", "--watch")
    assert "Flow run finished successfully in 'Completed'" in full.stdout
    assert (repo / "reports" / "summary.md").is_file()
    assert "Data and pipelines are up to date." in dvc("status", cwd=repo).stdout
    report = served.artifact("gpt1-report")
    assert report["type"] == "markdown"
    summary = (repo / "reports" / "summary.md").read_text()
    assert report["data"].startswith(summary.splitlines()[0])
    assert report["data"].count("](data:image/png;base64,") == summary.count("\n![")
    # the UI on this port, in a browser: the flow run listed, the report with its figures
    flow_run = re.search(r"Created flow run '([^']+)'", full.stdout).group(1)
    with chromium(served.log.parent / "chromium") as tab:
        runs = tab.show(f"{ui}/runs", until=flow_run, screenshot=served.log.parent / "runs.png")
        assert flow_run in runs.text and "Something went wrong" not in runs.text, runs.text
        page = tab.show(f"{ui}/artifacts/artifact/{report['id']}", until=TITLE,
                        screenshot=served.log.parent / "report.png")
        assert TITLE in page.text and "Something went wrong" not in page.text, page.text
        figures = [width for src, width in page.images if src.startswith("data:image/png")]
        assert len(figures) >= 2 and all(width > 0 for width in figures), page.images
    metrics = served.artifact("gpt1-metrics")
    assert metrics["type"] == "table"
    rows = json.loads(metrics["data"])
    sst2 = json.loads((repo / "metrics" / "finetune" / "sst2.json").read_text())
    assert {"task": "sst2", "split": "dev", "metric": "accuracy", "median": sst2["accuracy"],
            "min": sst2["accuracy_min"], "max": sst2["accuracy_max"],
            "majority": sst2["majority_accuracy"]}.items() <= rows[
        [r["task"] for r in rows].index("sst2")].items()
    stages = json.loads(served.artifact("gpt1-stages")["data"])
    assert [row["stage"] for row in stages] == run_order(repo)
    assert [row["stage"] for row in stages if row["ran"]] == ["ingest", "lm_eval", "report"]

    before = mtimes(repo)
    sst2_path = repo / "metrics" / "finetune" / "sst2.json"
    sst2_before = json.loads(sst2_path.read_text())
    one = served.prefect("deployment", "run", "finetune/default", "-p", "task=sst2",
                         "-p", "force=true", "--watch")
    assert "Flow run finished successfully in 'Completed'" in one.stdout
    # Training is seeded, so the forced re-run reproduces the metrics but for wall seconds (to
    # 0.1 s); its stage record (when it finished) changes whatever, so the report re-runs.
    sst2_after = json.loads(sst2_path.read_text())
    assert without_seconds(sst2_after) == without_seconds(sst2_before)
    stages = json.loads(served.artifact("gpt1-stages")["data"])
    assert [row["stage"] for row in stages if row["ran"]] == ["finetune@sst2", "report"]
    after = mtimes(repo)
    assert {path for path in before if after[path] != before[path]} == \
        {"metrics/finetune/sst2.json", "reports/summary.md"}
    assert "Data and pipelines are up to date." in dvc("status", cwd=repo).stdout

    # a team scores a new file with a task's fine-tuned model: nothing to bring up to date
    (repo / "new.csv").write_text('text\n"a fine, ""moving"" film"\nit was dull\n')
    scored = served.prefect("deployment", "run", "predict/default", "-p", "task=sst2",
                            "-p", "input=new.csv", "--watch")
    assert "Flow run finished successfully in 'Completed'" in scored.stdout
    rows = pq.read_table(repo / "scored" / "sst2" / "new.parquet").to_pylist()
    assert [row["text"] for row in rows] == ['a fine, "moving" film', "it was dull"]
    assert {row["prediction"] for row in rows} <= {"0", "1"}
    preview = served.artifact("gpt1-predictions")
    assert preview["type"] == "table"
    assert [row["prediction"] for row in json.loads(preview["data"])] == [
        row["prediction"] for row in rows]

    failed = served.prefect("deployment", "run", "finetune/default", "-p", "task=nope",
                            "--watch", check=False)
    assert failed.returncode != 0
    assert "Flow run finished in state 'Failed'" in failed.stdout + failed.stderr


def test_an_ipv6_address_in_use_is_refused_before_anything_starts(tmp_path: Path) -> None:
    """flows.server.host may be an IPv6 address (::1): its port is checked, and named, as a URL
    writes it, in brackets."""
    with socket.socket(socket.AF_INET6) as taken:
        try:
            taken.bind(("::1", 0))
        except OSError as err:  # a machine without IPv6
            skip_outside_ci(f"cannot listen on ::1: {err}")
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ServerError, match=re.escape(f"[::1]:{port} is already in use")):
            start_server(tmp_path / "prefect", ServerParams(host="::1", port=port))
    assert not (tmp_path / "prefect").exists()
