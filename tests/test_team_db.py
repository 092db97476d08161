"""flows.team's errors, before any PostgreSQL runs: each names what to do, and nothing is left
half-made. (tests/test_prefect_team.py starts and stops a real cluster.)"""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest

from flows import team
from tests.conftest import skip_outside_ci


def test_url_of_a_folder_without_a_running_cluster_says_to_start_one(tmp_path: Path) -> None:
    with pytest.raises(team.PostgresError, match=re.escape("python -m flows.team db start --dir")):
        team.url(tmp_path / "db")


def test_stopping_a_folder_where_nothing_runs_does_nothing(tmp_path: Path) -> None:
    team.stop(tmp_path / "db")
    assert not (tmp_path / "db").exists()


def test_a_port_in_use_is_refused_before_the_cluster_is_created(tmp_path: Path) -> None:
    try:
        team.postgres_bin()
    except team.PostgresNotFound as err:
        skip_outside_ci(str(err))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        in_use = re.escape(f"127.0.0.1:{port} is already in use")
        with pytest.raises(team.PostgresError, match=in_use):
            team.start(tmp_path / "db", port)
    assert not (tmp_path / "db").exists()


def test_the_command_line_reports_errors_without_a_traceback(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exit_:
        team.main(["db", "url", "--dir", str(tmp_path / "db")])
    assert str(exit_.value).startswith("error: no PostgreSQL runs in ")


def test_the_auth_string_is_made_once_and_kept_private(tmp_path: Path) -> None:
    path = tmp_path / "secrets" / "auth"
    first = team.auth_string(path)
    assert re.fullmatch(r"gpt1:[A-Za-z0-9_-]{32}", first)
    assert path.stat().st_mode & 0o777 == 0o600
    assert team.auth_string(path) == first


def test_env_prints_the_server_and_client_settings(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    team.main(["env", "--url", "http://gpt1-server:4200", "--auth-file", str(tmp_path / "a")])
    auth = (tmp_path / "a").read_text().strip()
    assert capsys.readouterr().out.splitlines() == [
        "# the server's machine, before `prefect server start`",
        f"export PREFECT_SERVER_API_AUTH_STRING={auth}",
        "export PREFECT_SERVER_CSRF_PROTECTION_ENABLED=true",
        "export PREFECT_SERVER_UI_API_URL=http://gpt1-server:4200/api",
        "# every teammate's shell, each worker, flows.serve",
        "export PREFECT_API_URL=http://gpt1-server:4200/api",
        f"export PREFECT_API_AUTH_STRING={auth}"]


def test_env_refuses_an_address_without_a_port(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        team.main(["env", "--url", "gpt1-server", "--auth-file", str(tmp_path / "a")])
    assert stop.value.code == 2
    assert capsys.readouterr().err == ("error: --url 'gpt1-server': give the server's address "
                                       "as teammates reach it, http://host:port\n")
    assert not (tmp_path / "a").exists()
