"""`python -m flows.serve` (or `make serve`): serve the deployments `full-pipeline/default`,
`finetune/default`, `predict/default` and `sweep/default` from this checkout until stopped
(Ctrl-C or SIGTERM).

With PREFECT_API_URL in the environment they are registered with that server. Without it, a
Prefect server is started on `flows.server.host:port` of params.yaml, with its SQLite database
under `.prefect/` in the checkout, and stopped again on exit. Trigger runs from another shell:

    export PREFECT_API_URL=http://127.0.0.1:4200/api
    prefect deployment run full-pipeline/default --watch
    prefect deployment run finetune/default -p task=sst2 --watch
    prefect deployment run predict/default -p task=sst2 -p input=new.csv --watch
    prefect deployment run sweep/default -p task=sst2 -p 'grid={"lr": [0.0005, 0.002]}' --watch
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path

from gpt1.config import ServerParams, load_params
from gpt1.errors import InputError
from gpt1.net import host_port, port_in_use

PREFECT_HOME = Path(".prefect")
SERVER_LOG = "server.log"
SERVER_PID = "server.pid"
START_TIMEOUT_SECONDS = 120
# Prefect 3's setting of the API URL its UI calls, and the older name it still reads
UI_API_URL_SETTINGS = ("PREFECT_SERVER_UI_API_URL", "PREFECT_UI_API_URL")


class ServerError(RuntimeError):
    """The local Prefect server could not be started."""


def _healthy(api_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{api_url}/health", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def start_server(home: Path, server: ServerParams,
                 extra_env: Mapping[str, str] | None = None) -> tuple[subprocess.Popen, str]:
    """A Prefect server on `server.host:port` with PREFECT_HOME `home` and the settings in
    `extra_env` (a team's PREFECT_API_DATABASE_CONNECTION_URL, say), running and healthy;
    returns the process and its API URL. Its log is `home/server.log`, its PID
    `home/server.pid`."""
    address = host_port(server.host, server.port)
    api_url = f"http://{address}/api"
    if port_in_use(server.host, server.port):
        raise ServerError(f"{address} is already in use: set flows.server.port in params.yaml, "
                          "or PREFECT_API_URL to use a server that runs there")
    home.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PREFECT_HOME": str(home.resolve()),
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", **(extra_env or {})}
    env.pop("PREFECT_API_URL", None)
    # the API the UI's pages call from the browser: Prefect's default is 127.0.0.1:4200 whatever
    # port the server listens on; a team sets the address teammates reach it by
    if not any(env.get(name) for name in UI_API_URL_SETTINGS):
        env[UI_API_URL_SETTINGS[0]] = api_url
    with open(home / SERVER_LOG, "ab") as log:
        # its own process group: stopping it stops the workers it starts too
        proc = subprocess.Popen(
            [sys.executable, "-m", "prefect", "server", "start", "--host", server.host,
             "--port", str(server.port)],
            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    (home / SERVER_PID).write_text(f"{proc.pid}\n")
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while not _healthy(api_url):
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_server(proc)
            tail = (home / SERVER_LOG).read_text(errors="replace").splitlines()[-20:]
            raise ServerError(f"the Prefect server did not start (log {home / SERVER_LOG}):\n"
                              + "\n".join(tail))
        time.sleep(0.5)
    return proc, api_url


def stop_server(proc: subprocess.Popen, grace: float = 30) -> None:
    """SIGTERM to the server's process group, SIGKILL after `grace` seconds."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def serve_deployments() -> None:
    """Register the deployments and execute their runs here, on the checkout in this process's
    working folder, until interrupted."""
    # imported only now: Prefect reads PREFECT_API_URL and PREFECT_HOME when it is imported
    from prefect import serve

    from flows.finetune import finetune
    from flows.full_pipeline import full_pipeline
    from flows.predict import predict
    from flows.sweep import sweep

    # no parameter names a path: a run works on the checkout this process serves from
    serve(*(each.to_deployment(name="default")
            for each in (full_pipeline, finetune, predict, sweep)))


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> None:
    # it takes no arguments: refuse any (exit 2), rather than serve as if none were given
    argparse.ArgumentParser(prog="python -m flows.serve", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter
                            ).parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)  # SIGTERM stops serving as Ctrl-C does
    repo_root = Path.cwd()
    params = load_params(repo_root / "params.yaml")
    if os.environ.get("PREFECT_API_URL"):
        from flows.cli import check_server  # imports Prefect: only once PREFECT_API_URL is set

        try:
            check_server()
        except InputError as err:
            print(f"error: {err}", file=sys.stderr)
            sys.exit(2)
        print(f"serving on the Prefect server at {os.environ['PREFECT_API_URL']}", flush=True)
        serve_deployments()
        return
    home = repo_root / PREFECT_HOME
    try:
        server, api_url = start_server(home, params.flows.server)
    except ServerError as err:
        sys.exit(f"error: {err}")
    os.environ.update(PREFECT_API_URL=api_url, PREFECT_HOME=str(home))
    print(f"Prefect server at {api_url} (UI: {api_url.removesuffix('/api')}, data: {home}); "
          f"in another shell: export PREFECT_API_URL={api_url}", flush=True)
    try:
        serve_deployments()
    finally:
        stop_server(server)


if __name__ == "__main__":
    main()
