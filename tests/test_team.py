"""The team server's auth file (`gpt1 team env --auth-file`): made once, private, and
refused in one line (exit 2) when it would open the server or leak its password: empty,
malformed, a folder, or readable by group or others. Nothing is written when it is refused.

gpt1.team's errors, before any PostgreSQL runs: each names what to do, and nothing is left
half-made. (tests/e2e/test_prefect_team.py starts and stops a real cluster.)"""

from __future__ import annotations

import re
import shlex
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from gpt1 import team
from tests.conftest import skip_outside_ci

URL = "http://127.0.0.1:4310"
GOOD = "gpt1:" + "s" * 16  # the shortest secret allowed (team.MIN_SECRET_CHARS)


def _env(auth_file: Path) -> Result:
    """`gpt1 team env --url URL --auth-file auth_file`, run in this process."""
    return CliRunner().invoke(team.team_app, ["env", "--url", URL, "--auth-file", str(auth_file)])


def _refused(auth_file: Path) -> str:
    """What `env` printed on stderr when it refused `auth_file` (exit 2, nothing on stdout)."""
    result = _env(auth_file)
    assert result.exit_code == 2, (result.output, result.exception)
    assert result.stdout == "" and result.stderr.count("\n") == 1, (result.stdout, result.stderr)
    return result.stderr


def _write(path: Path, text: str | bytes, mode: int = 0o600) -> Path:
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    path.chmod(mode)
    return path


@pytest.mark.parametrize("text", ["", "\n", "  \n\n"], ids=["empty", "newline", "blank"])
def test_an_empty_auth_file_is_refused(tmp_path: Path, text: str) -> None:
    """The server would take '' for its auth string and let in anyone who sends `Basic =`."""
    auth = _write(tmp_path / "auth", text)
    assert _refused(auth) == (
        f"error: --auth-file {auth}: empty, and an empty auth string lets anyone in: delete the "
        "file to have a new one made, or write one line `user:secret` in it (a secret of at "
        "least 16 characters)\n")
    assert auth.read_text() == text


@pytest.mark.parametrize("text", [
    "gpt1", "gpt1:", ":" + "s" * 20, "gpt1:" + "s" * 15, "gpt1:short secret with spaces",
    f"{GOOD}\nsecond line\n", "a:b:" + "s" * 10, b"gpt1:\xff\xfe" + b"s" * 20,
], ids=["no-colon", "no-secret", "no-user", "secret-15-chars", "spaces", "two-lines",
        "short-after-colon", "not-utf8"])
def test_a_malformed_auth_file_is_refused_without_showing_it(tmp_path: Path,
                                                             text: str | bytes) -> None:
    auth = _write(tmp_path / "auth", text)
    err = _refused(auth)
    assert err == (f"error: --auth-file {auth}: not one line `user:secret` (a user without `:`, "
                   "a secret of at least 16 characters, no spaces): delete the file to have a "
                   "new one made, or mend it\n")
    assert "s" * 10 not in err  # never the file's contents


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660, 0o704],
                         ids=["0640", "0604", "0660", "0704"])
def test_an_auth_file_others_can_read_is_refused(tmp_path: Path, mode: int) -> None:
    auth = _write(tmp_path / "auth", GOOD + "\n", mode)
    assert _refused(auth) == (
        f"error: --auth-file {auth}: open to group or others (mode {mode:04o}), and it holds the "
        f"team server's password: chmod 600 {auth}\n")
    auth.chmod(0o600)
    assert team.auth_string(auth) == GOOD


def test_a_folder_or_a_device_is_refused(tmp_path: Path) -> None:
    assert _refused(tmp_path) == (
        f"error: --auth-file {tmp_path}: is a directory: name the file the auth string is kept "
        "in (the first call makes it)\n")
    assert _refused(Path("/dev/null")).startswith(
        "error: --auth-file /dev/null: not a regular file: ")
    _write(tmp_path / "file", GOOD)
    assert _refused(tmp_path / "file" / "auth") == (
        f"error: --auth-file {tmp_path / 'file' / 'auth'}: {tmp_path / 'file'} is not a "
        "directory\n")


def test_a_good_auth_file_is_kept_and_a_new_one_made_private(tmp_path: Path) -> None:
    mine = _write(tmp_path / "mine", f"  {GOOD}\n")
    result = _env(mine)
    assert result.exit_code == 0, (result.output, result.exception)
    assert f"export PREFECT_API_AUTH_STRING={GOOD}" in result.stdout.splitlines()
    made = tmp_path / "new" / "auth"
    assert _env(made).exit_code == 0
    assert made.stat().st_mode & 0o777 == 0o600
    assert team.check_auth_string(made.read_text().strip())
    assert len(made.read_text().strip().partition(":")[2]) == 32


def test_the_command_line_says_it_in_one_line_without_a_traceback(tmp_path: Path) -> None:
    """As the issue put it: `: > auth; gpt1 team env --url ... --auth-file auth`."""
    (tmp_path / "auth").touch()
    proc = subprocess.run([sys.executable, "-m", "gpt1.cli", "team", "env", "--url", URL,
                           "--auth-file", "auth"], cwd=tmp_path, capture_output=True, text=True,
                          env={"PYTHONPATH": str(Path(__file__).resolve().parents[1]),
                               "PATH": str(Path(sys.executable).parent)})
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == "" and "PREFECT_SERVER_API_AUTH_STRING" not in proc.stdout
    assert proc.stderr.startswith("error: --auth-file auth: empty, ") and \
        proc.stderr.count("\n") == 1, proc.stderr


def test_url_of_a_folder_without_a_running_cluster_says_to_start_one(tmp_path: Path) -> None:
    with pytest.raises(team.PostgresError, match=re.escape("gpt1 team db start --dir")):
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
    result = CliRunner().invoke(team.team_app, ["db", "url", "--dir", str(tmp_path / "db")])
    assert result.exit_code == 1, (result.output, result.exception)
    assert result.stdout == ""
    assert result.stderr.startswith("error: no PostgreSQL runs in ")
    assert result.stderr.count("\n") == 1, result.stderr


def test_the_auth_string_is_made_once_and_kept_private(tmp_path: Path) -> None:
    path = tmp_path / "secrets" / "auth"
    first = team.auth_string(path)
    assert re.fullmatch(r"gpt1:[A-Za-z0-9_-]{32}", first)
    assert path.stat().st_mode & 0o777 == 0o600
    assert team.auth_string(path) == first


def test_env_prints_the_server_and_client_settings(tmp_path: Path) -> None:
    result = CliRunner().invoke(team.team_app, ["env", "--url", "http://gpt1-server:4200",
                                                "--auth-file", str(tmp_path / "a")])
    assert result.exit_code == 0, (result.output, result.exception)
    auth = (tmp_path / "a").read_text().strip()
    assert result.stdout.splitlines() == [
        "# the server's machine, before `prefect server start`",
        f"export PREFECT_SERVER_API_AUTH_STRING={auth}",
        "export PREFECT_SERVER_CSRF_PROTECTION_ENABLED=true",
        "export PREFECT_SERVER_UI_API_URL=http://gpt1-server:4200/api",
        "# every teammate's shell, each worker, flows.serve",
        "export PREFECT_API_URL=http://gpt1-server:4200/api",
        f"export PREFECT_API_AUTH_STRING={auth}"]


@pytest.mark.parametrize("address", [
    "http://[::1]:4310", "https://[2001:db8::7]:443/", "http://[::ffff:127.0.0.1]:4200",
    "http://127.0.0.1:4310/", "http://gpt1-server:4200"])
def test_env_takes_a_host_name_or_an_ip_address_in_brackets(tmp_path: Path, address: str) -> None:
    """An IPv6 address is written in brackets in a URL (RFC 3986), as a browser takes it."""
    result = CliRunner().invoke(team.team_app, ["env", "--url", address,
                                                "--auth-file", str(tmp_path / "a")])
    assert result.exit_code == 0, (result.output, result.exception)
    exports = [shlex.split(line) for line in result.stdout.splitlines() if line[0] != "#"]
    assert ["export", f"PREFECT_API_URL={address.removesuffix('/')}/api"] in exports, exports


@pytest.mark.parametrize("address", [
    "gpt1-server", "http://gpt1-server", "gpt1-server:4200", "ftp://gpt1-server:4200",
    "http://::1:4310", "http://[::1:4310", "http://::1]:4310", "http://[::1]", "http://[::1]:",
    "http://[gpt1-server]:4200", "http://[1.2.3.4]:4200", "http://[:::1]:4200",
    "http://[fe80::1%eth0]:4200", "http://[::1]x:4200", "http://gpt1-server:0",
    "http://gpt1-server:65536", "http://gpt1-server:4200/api", "http://gpt1 server:4200"])
def test_env_refuses_an_address_that_is_not_a_servers(tmp_path: Path, address: str) -> None:
    result = CliRunner().invoke(team.team_app, ["env", "--url", address,
                                                "--auth-file", str(tmp_path / "a")])
    assert result.exit_code == 2, (result.output, result.exception)
    assert result.stderr == (f"error: --url {address!r}: give the server's address as "
                             "teammates reach it, http://host:port (an IPv6 address in brackets: "
                             "http://[::1]:4200)\n")
    assert not (tmp_path / "a").exists()
