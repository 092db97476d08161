"""The team server's auth file (`python -m flows.team env --auth-file`): made once, private, and
refused in one line (exit 2) when it would open the server or leak its password: empty,
malformed, a folder, or readable by group or others. Nothing is written when it is refused."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from flows import team

URL = "http://127.0.0.1:4310"
GOOD = "gpt1:" + "s" * 16  # the shortest secret allowed (team.MIN_SECRET_CHARS)


def _refused(auth_file: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """What `env` printed on stderr when it refused `auth_file` (exit 2, nothing on stdout)."""
    with pytest.raises(SystemExit) as stop:
        team.main(["env", "--url", URL, "--auth-file", str(auth_file)])
    out, err = capsys.readouterr()
    assert stop.value.code == 2, err
    assert out == "" and err.count("\n") == 1, (out, err)
    return err


def _write(path: Path, text: str | bytes, mode: int = 0o600) -> Path:
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    path.chmod(mode)
    return path


@pytest.mark.parametrize("text", ["", "\n", "  \n\n"], ids=["empty", "newline", "blank"])
def test_an_empty_auth_file_is_refused(tmp_path: Path, text: str,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    """The server would take '' for its auth string and let in anyone who sends `Basic =`."""
    auth = _write(tmp_path / "auth", text)
    assert _refused(auth, capsys) == (
        f"error: --auth-file {auth}: empty, and an empty auth string lets anyone in: delete the "
        "file to have a new one made, or write one line `user:secret` in it (a secret of at "
        "least 16 characters)\n")
    assert auth.read_text() == text


@pytest.mark.parametrize("text", [
    "gpt1", "gpt1:", ":" + "s" * 20, "gpt1:" + "s" * 15, "gpt1:short secret with spaces",
    f"{GOOD}\nsecond line\n", "a:b:" + "s" * 10, b"gpt1:\xff\xfe" + b"s" * 20,
], ids=["no-colon", "no-secret", "no-user", "secret-15-chars", "spaces", "two-lines",
        "short-after-colon", "not-utf8"])
def test_a_malformed_auth_file_is_refused_without_showing_it(
        tmp_path: Path, text: str | bytes, capsys: pytest.CaptureFixture[str]) -> None:
    auth = _write(tmp_path / "auth", text)
    err = _refused(auth, capsys)
    assert err == (f"error: --auth-file {auth}: not one line `user:secret` (a user without `:`, "
                   "a secret of at least 16 characters, no spaces): delete the file to have a "
                   "new one made, or mend it\n")
    assert "s" * 10 not in err  # never the file's contents


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660, 0o704],
                         ids=["0640", "0604", "0660", "0704"])
def test_an_auth_file_others_can_read_is_refused(tmp_path: Path, mode: int,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    auth = _write(tmp_path / "auth", GOOD + "\n", mode)
    assert _refused(auth, capsys) == (
        f"error: --auth-file {auth}: open to group or others (mode {mode:04o}), and it holds the "
        f"team server's password: chmod 600 {auth}\n")
    auth.chmod(0o600)
    assert team.auth_string(auth) == GOOD


def test_a_folder_or_a_device_is_refused(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert _refused(tmp_path, capsys) == (
        f"error: --auth-file {tmp_path}: is a directory: name the file the auth string is kept "
        "in (the first call makes it)\n")
    assert _refused(Path("/dev/null"), capsys).startswith(
        "error: --auth-file /dev/null: not a regular file: ")
    _write(tmp_path / "file", GOOD)
    assert _refused(tmp_path / "file" / "auth", capsys) == (
        f"error: --auth-file {tmp_path / 'file' / 'auth'}: {tmp_path / 'file'} is not a "
        "directory\n")


def test_a_good_auth_file_is_kept_and_a_new_one_made_private(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mine = _write(tmp_path / "mine", f"  {GOOD}\n")
    team.main(["env", "--url", URL, "--auth-file", str(mine)])
    assert f"export PREFECT_API_AUTH_STRING={GOOD}" in capsys.readouterr().out.splitlines()
    made = tmp_path / "new" / "auth"
    team.main(["env", "--url", URL, "--auth-file", str(made)])
    assert made.stat().st_mode & 0o777 == 0o600
    assert team.check_auth_string(made.read_text().strip())
    assert len(made.read_text().strip().partition(":")[2]) == 32


def test_the_command_line_says_it_in_one_line_without_a_traceback(tmp_path: Path) -> None:
    """As the issue put it: `: > auth; python -m flows.team env --url ... --auth-file auth`."""
    (tmp_path / "auth").touch()
    proc = subprocess.run([sys.executable, "-m", "flows.team", "env", "--url", URL,
                           "--auth-file", "auth"], cwd=tmp_path, capture_output=True, text=True,
                          env={"PYTHONPATH": str(Path(__file__).resolve().parents[1]),
                               "PATH": str(Path(sys.executable).parent)})
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == "" and "PREFECT_SERVER_API_AUTH_STRING" not in proc.stdout
    assert proc.stderr.startswith("error: --auth-file auth: empty, ") and \
        proc.stderr.count("\n") == 1, proc.stderr
