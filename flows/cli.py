"""What every `python -m flows.<flow>` does around its flow run: its command line parsed (an
unknown argument is an argparse error, exit 2); the Prefect server that PREFECT_API_URL names
asked first whether it answers and takes PREFECT_API_AUTH_STRING (Prefect Cloud is not asked);
and bad input, found before or during the run, told in one line on stderr with exit code 2
instead of a traceback. A run whose server stops answering ends within seconds of its last
stage (flows/__init__.py bounds Prefect's client retries) in one line and exit code 1: the
stages it completed are in dvc.lock. Anything else, a bug, keeps its traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

import httpx

from flows.stages import EXPECTED_FAILURE, StageFailed
from gpt1.config import load_params
from gpt1.errors import InputError, describe, is_input_error

CHECK_TIMEOUT_SECONDS = 10  # how long the server PREFECT_API_URL names gets to answer at first
LOST = 1  # the exit code of a run whose Prefect server stopped answering: not bad input
GATEWAY_ERRORS = frozenset({502, 503, 504})  # a proxy before a server that is gone


def parser(prog: str, description: str | None) -> argparse.ArgumentParser:
    """The command line of `python -m <prog>`: `parse_args` exits 2 on an unknown argument."""
    return argparse.ArgumentParser(prog=f"python -m {prog}", description=description)


def _api_url() -> str | None:
    from prefect.settings import get_current_settings

    return get_current_settings().api.url or None


def check_server() -> None:
    """Raise `InputError` unless the Prefect server PREFECT_API_URL names (none: the flow starts
    a temporary one) answers within `CHECK_TIMEOUT_SECONDS` and takes PREFECT_API_AUTH_STRING
    (or PREFECT_API_KEY). Each is named with what to do; the secret never is."""
    url = _api_url()
    if url is None:
        return
    from prefect.client.base import ServerType
    from prefect.client.orchestration import get_client
    from prefect.settings import (
        PREFECT_API_REQUEST_TIMEOUT,
        PREFECT_CLIENT_MAX_RETRIES,
        get_current_settings,
        temporary_settings,
    )

    api = get_current_settings().api
    where = f"PREFECT_API_URL={url}"
    with temporary_settings({PREFECT_API_REQUEST_TIMEOUT: CHECK_TIMEOUT_SECONDS,
                             PREFECT_CLIENT_MAX_RETRIES: 0}):
        try:
            with get_client(sync_client=True) as client:
                if client.server_type == ServerType.CLOUD:
                    return  # no /admin there: Prefect Cloud's API is another
                client.api_version()  # GET /admin/version: authenticated, unlike /health
        except httpx.TransportError as err:  # refused, no such host, timed out
            waited = (f" after {CHECK_TIMEOUT_SECONDS} s"
                      if isinstance(err, httpx.TimeoutException) else "")
            raise InputError(
                f"{where}: no Prefect server answers there ({type(err).__name__}"
                f"{': ' + str(err) if str(err) else ''}{waited}): start it, fix the address "
                "(http://host:port/api), or unset PREFECT_API_URL to run on a temporary local "
                "server") from None
        except httpx.HTTPStatusError as err:
            code = err.response.status_code
            if code == 401:
                setting = ("PREFECT_API_AUTH_STRING" if api.auth_string or not api.key
                           else "PREFECT_API_KEY")
                given = (api.auth_string or api.key) is not None
                what = "refuses it" if given else "requires it, and it is not set"
                raise InputError(
                    f"{setting}: the Prefect server at {url} {what} (401 Unauthorized): set it "
                    "to the server's auth string, `user:secret` (the client half of what "
                    "`gpt1 team env` printed)") from None
            if code == 404:
                raise InputError(f"{where}: answers, but has no Prefect API there (404 on "
                                 "/admin/version): the API's address ends in /api, "
                                 "http://host:port/api") from None
            raise
        except json.JSONDecodeError:
            raise InputError(f"{where}: answers, but not as Prefect's API (/admin/version is "
                             "not JSON): the API's address ends in /api, "
                             "http://host:port/api") from None


def check_task(repo_root: Path, task: str) -> None:
    """Raise `InputError` unless `task` is in the task registry (params.yaml `tasks`), whose
    tasks are the `finetune@<task>` stages of dvc.yaml."""
    registry = load_params(repo_root / "params.yaml").tasks
    if task not in registry:
        raise InputError(f"task {task!r}: not in the task registry of params.yaml (tasks: "
                         f"{', '.join(registry)})")


def _lost_server(err: httpx.HTTPError) -> bool:
    """Whether `err` says the Prefect server stopped answering: no connection, or a gateway's
    502, 503 or 504 in its place."""
    if isinstance(err, httpx.TransportError):
        return True
    return isinstance(err, httpx.HTTPStatusError) and \
        err.response.status_code in GATEWAY_ERRORS


def _bad_input(err: Exception) -> bool:
    """Bad input, met before or during the run: a stage's included (its exit code 2)."""
    if isinstance(err, StageFailed):
        return err.returncode == EXPECTED_FAILURE
    return is_input_error(err)


def _exit_now(code: int) -> None:
    """Exit at once, skipping Prefect's exit handlers: with its server gone, they would retry
    each event and log batch the run left, for minutes."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run_flow(call: Callable[[], object], checks: Callable[[], None] | None = None) -> None:
    """`checks()` (the arguments'), `check_server()`, then `call()` (the flow run): bad input in
    one line (exit 2), a server that stopped answering during the run in one line (exit 1)."""
    try:
        if checks is not None:
            checks()
        check_server()
        call()
    except (InputError, OSError, StageFailed) as err:
        if not _bad_input(err):
            raise
        print(f"error: {describe(err)}", file=sys.stderr)
        sys.exit(EXPECTED_FAILURE)
    except httpx.HTTPError as err:
        if not _lost_server(err) or _api_url() is None:
            raise
        print(f"error: the Prefect server at PREFECT_API_URL={_api_url()} stopped answering "
              f"during the run ({type(err).__name__}: {err}); the stages it completed are "
              "recorded in dvc.lock: start the server again and re-run the flow", file=sys.stderr)
        _exit_now(LOST)
