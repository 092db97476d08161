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
