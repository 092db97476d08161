"""`gpt1 team db start|stop|url`: the PostgreSQL database behind a team's Prefect server, a
cluster of the operating system's PostgreSQL under one directory; `gpt1 team env`: the settings
of the server and of its clients (docs/scaling.md).

    gpt1 team db start --dir /srv/gpt1-db --port 5432   # prints the database URL
    gpt1 team env --url http://gpt1-server:4200 --auth-file /srv/gpt1-db/auth > team.env
    source team.env
    PREFECT_API_DATABASE_CONNECTION_URL=$(gpt1 team db url --dir /srv/gpt1-db) \\
        prefect server start --host gpt1-server --port 4200
    gpt1 team db stop --dir /srv/gpt1-db

`env` prints `export` lines: for the server, an auth string (made once, kept in --auth-file,
mode 0600), CSRF protection and the API URL its UI calls (the address teammates use); for every
client (the CLI, workers, flows.serve), that URL and the same auth string.

The first `start` creates the cluster (initdb) with a role and a database named `prefect`,
the role's random password in `<dir>/password` (mode 0600); later ones start it again.
It listens on 127.0.0.1 only: the Prefect server runs on the same host, workers never connect
to the database. PostgreSQL refuses to run as root, so as root the cluster is created and run
as the user `postgres` (`--user`), through `runuser`, and `<dir>` is given to that user.

Errors are one line on stderr: bad input (`gpt1.errors.is_input_error`: a malformed --url or
auth file, a directory that cannot be made) exits 2, a cluster that cannot be created, started
or stopped (`PostgresError`) exits 1. Imports neither Prefect nor DVC.
"""

from __future__ import annotations

import glob
import os
import pwd
import re
import secrets
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from gpt1.command_errors import input_errors
from gpt1.errors import InputError
from gpt1.net import is_ipv6, port_in_use

PROGRAMS = ("initdb", "pg_ctl", "postgres", "createdb")
DB_NAME = "prefect"  # the role and the database Prefect's tables go in
DATA = "data"  # <dir>/data: the cluster itself
LOG = "postgres.log"
PASSWORD_FILE = "password"
HOST = "127.0.0.1"
AUTH_USER = "gpt1"  # the user half of the team server's auth string
MIN_SECRET_CHARS = 16  # the shortest secret half an auth file may hold (a made one has 32)


class PostgresError(RuntimeError):
    """The team's PostgreSQL cluster could not be created, started or stopped."""


class PostgresNotFound(PostgresError):
    """No PostgreSQL server programs (initdb, pg_ctl, postgres) on this machine."""


def postgres_bin() -> Path:
    """The directory of the OS PostgreSQL's server programs: $GPT1_PG_BIN, else what
    `pg_config --bindir` says, else the newest /usr/lib/postgresql/*/bin (Debian, Ubuntu),
    else the directory of `pg_ctl` on PATH."""
    candidates = [os.environ["GPT1_PG_BIN"]] if os.environ.get("GPT1_PG_BIN") else []
    if shutil.which("pg_config"):
        # libpq-dev's pg_config may name another major version than the server installed
        bindir = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True)
        candidates.append(bindir.stdout.strip())
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"),
                         key=lambda d: int(Path(d).parent.name) if
                         Path(d).parent.name.isdigit() else 0, reverse=True)
    if pg_ctl := shutil.which("pg_ctl"):
        candidates.append(str(Path(pg_ctl).resolve().parent))
    for candidate in filter(None, candidates):
        if all(os.access(Path(candidate) / p, os.X_OK) for p in PROGRAMS):
            return Path(candidate)
    raise PostgresNotFound(
        f"no PostgreSQL server programs ({', '.join(PROGRAMS)}) in {candidates or 'any'} "
        "(tried $GPT1_PG_BIN, pg_config --bindir, /usr/lib/postgresql/*/bin, PATH): install "
        "the OS package (Debian/Ubuntu: apt-get install postgresql) or set GPT1_PG_BIN")


def _as_owner(cmd: list[str], user: str) -> list[str]:
    """`cmd` run as `user` when we are root (PostgreSQL will not run as root), else as is."""
    return ["runuser", "-u", user, "--", *cmd] if os.geteuid() == 0 else cmd


def _run(cmd: list[str], what: str, env: dict[str, str] | None = None) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd="/")
    if proc.returncode:
        raise PostgresError(f"{what} failed (exit {proc.returncode}): {' '.join(cmd)}\n"
                            f"{proc.stdout}{proc.stderr}")


def _log_tail(root: Path) -> str:
    log = root / LOG
    return "\n".join(log.read_text(errors="replace").splitlines()[-20:]) if log.is_file() else ""


def _create(root: Path, bindir: Path, user: str) -> None:
    """initdb a cluster in `root/data` whose superuser `prefect` has a random password, kept
    in `root/password` (mode 0600, readable by PostgreSQL's user only)."""
    owner = None
    if os.geteuid() == 0:
        try:
            owner = pwd.getpwnam(user)
        except KeyError:
            raise PostgresError(f"no user {user!r} to run PostgreSQL as (it refuses to run as "
                                "root): create one, or pass --user") from None
        os.chown(root, owner.pw_uid, owner.pw_gid)
        if subprocess.run(_as_owner(["test", "-w", str(root)], user)).returncode:
            raise PostgresError(f"user {user!r} cannot write to {root}: every directory above "
                                "it must be searchable by that user (e.g. not under a 0700 one)")
    password_file = root / PASSWORD_FILE
    password_file.touch(mode=0o600)
    password_file.write_text(secrets.token_urlsafe(24) + "\n")
    if owner is not None:
        os.chown(password_file, owner.pw_uid, owner.pw_gid)
    _run(_as_owner([str(bindir / "initdb"), "-D", str(root / DATA), "-U", DB_NAME,
                    f"--pwfile={password_file}", "--auth=scram-sha-256", "-E", "UTF8",
                    "--locale=C"], user), "initdb")


def pid(root: Path) -> int | None:
    """The PID of the cluster's postmaster (postmaster.pid's first line); None when none runs."""
    pid_file = root / DATA / "postmaster.pid"
    if not pid_file.is_file():
        return None
    postmaster = int(pid_file.read_text().split("\n", 1)[0])
    try:
        os.kill(postmaster, 0)
    except ProcessLookupError:
        return None  # left behind by a crash; PostgreSQL replaces it when it starts
    return postmaster


def url(root: Path) -> str:
    """The running cluster's connection URL: its password file and the port it listens on."""
    root = root.resolve()
    if pid(root) is None:
        raise PostgresError(f"no PostgreSQL runs in {root / DATA}: "
                            f"`gpt1 team db start --dir {root}` first")
    port = (root / DATA / "postmaster.pid").read_text().splitlines()[3]  # line 4: the port
    password = (root / PASSWORD_FILE).read_text().strip()
    return f"postgresql+asyncpg://{DB_NAME}:{password}@{HOST}:{port}/{DB_NAME}"


def start(root: Path, port: int, user: str = "postgres") -> str:
    """Create (the first time) and start the cluster in `root` on 127.0.0.1:`port`; returns the
    connection URL for PREFECT_API_DATABASE_CONNECTION_URL."""
    bindir = postgres_bin()
    root = root.resolve()
    if (running := pid(root)) is not None:
        raise PostgresError(f"PostgreSQL already runs in {root / DATA} (pid {running})")
    if port_in_use(HOST, port):
        raise PostgresError(f"{HOST}:{port} is already in use: pass another --port")
    root.mkdir(parents=True, exist_ok=True)
    created = not (root / DATA / "PG_VERSION").is_file()
    if created:
        _create(root, bindir, user)
    # no Unix socket: none of its directories need exist, and pg_ctl -w polls postmaster.pid
    options = f"-c listen_addresses={HOST} -c port={port} -c unix_socket_directories=''"
    try:
        _run(_as_owner([str(bindir / "pg_ctl"), "-D", str(root / DATA), "-l", str(root / LOG),
                        "-w", "-t", "120", "-o", options, "start"], user), "pg_ctl start")
    except PostgresError as err:
        raise PostgresError(f"{err}\n{root / LOG}:\n{_log_tail(root)}") from None
    if created:
        password = (root / PASSWORD_FILE).read_text().strip()
        _run([str(bindir / "createdb"), "-h", HOST, "-p", str(port), "-U", DB_NAME, DB_NAME],
             "createdb", env={**os.environ, "PGPASSWORD": password})
    return url(root)


def stop(root: Path, user: str = "postgres") -> None:
    """Stop the cluster in `root` (fast: open sessions are ended), waiting until it has."""
    root = root.resolve()
    if pid(root) is not None:
        _run(_as_owner([str(postgres_bin() / "pg_ctl"), "-D", str(root / DATA), "-m", "fast",
                        "-w", "-t", "120", "stop"], user), "pg_ctl stop")


def auth_string(path: Path) -> str:
    """The team server's Basic Authentication string, `gpt1:<random>`, kept in `path` (mode
    0600): made by the first call, read by the later ones. An auth file already there must be
    a regular file holding one line `user:secret` (`check_auth_string`), readable by its owner
    alone: else `InputError`, naming the file and what to do (never its contents). The server
    would take an empty string as no password at all."""
    where = f"--auth-file {path}"
    if not os.path.lexists(path):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError) as err:  # a file where a folder must be
            raise InputError(f"{where}: {err.filename} is not a directory") from None
        with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as out:
            out.write(f"{AUTH_USER}:{secrets.token_urlsafe(24)}\n")
    if path.is_dir():
        raise InputError(f"{where}: is a directory: name the file the auth string is kept in "
                         "(the first call makes it)")
    if not path.is_file():
        raise InputError(f"{where}: not a regular file: name the file the auth string is kept "
                         "in (the first call makes it)")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and not text.strip():
        raise InputError(f"{where}: empty, and an empty auth string lets anyone in: delete the "
                         "file to have a new one made, or write one line `user:secret` in it "
                         f"(a secret of at least {MIN_SECRET_CHARS} characters)")
    if text is None or not check_auth_string(text.strip()):
        raise InputError(f"{where}: not one line `user:secret` (a user without `:`, a secret of "
                         f"at least {MIN_SECRET_CHARS} characters, no spaces): delete the file "
                         "to have a new one made, or mend it")
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        raise InputError(f"{where}: open to group or others (mode {mode:04o}), and it holds the "
                         f"team server's password: chmod 600 {path}")
    return text.strip()


def check_auth_string(auth: str) -> bool:
    """Whether `auth` is a Basic Authentication string fit for a team's server: `user:secret`,
    the user without `:`, the secret of at least `MIN_SECRET_CHARS` characters, neither with
    white space."""
    return re.fullmatch(rf"[^:\s]+:[^\s]{{{MIN_SECRET_CHARS},}}", auth) is not None


def api_url(address: str) -> str:
    """The API URL of the server at `address` (http://host:port, as teammates reach it; an IPv6
    address in brackets, http://[::1]:4200)."""
    match = re.fullmatch(r"https?://(?:\[(?P<ipv6>[\d.:A-Fa-f]+)\]|[^/:\s[\]]+):(?P<port>\d+)/?",
                         address)
    if (match is None or not 0 < int(match["port"]) < 2**16
            or (match["ipv6"] is not None and not is_ipv6(match["ipv6"]))):
        raise InputError(f"--url {address!r}: give the server's address as teammates reach it, "
                         "http://host:port (an IPv6 address in brackets: http://[::1]:4200)")
    return f"{address.rstrip('/')}/api"


def team_settings(api: str, auth: str) -> tuple[dict[str, str], dict[str, str]]:
    """The environment of a team's Prefect server whose API teammates reach at `api`, and that
    of everything talking to it (the CLI, workers, flows.serve): both hold the auth string; the
    server checks CSRF tokens, which Prefect's clients and UI send; its UI calls the API at
    `api`, not the default 127.0.0.1:4200 of the teammate's own machine."""
    server = {"PREFECT_SERVER_API_AUTH_STRING": auth,
              "PREFECT_SERVER_CSRF_PROTECTION_ENABLED": "true",
              "PREFECT_SERVER_UI_API_URL": api}
    return server, {"PREFECT_API_URL": api, "PREFECT_API_AUTH_STRING": auth}


def _exports(settings: dict[str, str]) -> list[str]:
    return [f"export {name}={shlex.quote(value)}" for name, value in settings.items()]


team_app = typer.Typer(no_args_is_help=True,
                       help="A team's Prefect server: its database and settings.")


@team_app.callback()
def _team() -> None:
    """A team's Prefect server: the PostgreSQL database behind it (`db`) and the settings of the
    server and of its clients (`env`); docs/scaling.md."""


@contextmanager
def _errors() -> Iterator[None]:
    """As gpt1's other commands (`input_errors`: bad input is one line and exit code 2, a bug
    keeps its traceback), and a `PostgresError` is `error: <message>` and exit code 1."""
    with input_errors():
        try:
            yield
        except PostgresError as err:
            typer.echo(f"error: {err}", err=True)
            raise typer.Exit(1) from None


class DbAction(StrEnum):
    """What `gpt1 team db` does with the cluster."""

    start = "start"
    stop = "stop"
    url = "url"


@team_app.command("db")
def db_command(
    action: Annotated[DbAction, typer.Argument(
        help="start: create (the first time) and start the cluster, printing its URL; "
             "stop: stop it; url: print the URL of the running cluster")],
    directory: Annotated[Path, typer.Option(
        "--dir", help="the cluster's directory (created by the first start)")],
    port: Annotated[int, typer.Option(help="the port it listens on, on 127.0.0.1")] = 5432,
    user: Annotated[str, typer.Option(
        help="the user PostgreSQL runs as when started by root")] = "postgres",
) -> None:
    """Start, stop, or print the URL of the team server's PostgreSQL.

    A cluster of the OS's PostgreSQL in the --dir folder, listening on 127.0.0.1 only; `start`
    creates it the first time and prints its URL, PREFECT_API_DATABASE_CONNECTION_URL's."""
    with _errors():
        if action is DbAction.start:
            typer.echo(start(directory, port, user))
        elif action is DbAction.stop:
            stop(directory, user)
        else:
            typer.echo(url(directory))


@team_app.command("env")
def env_command(
    address: Annotated[str, typer.Option(
        "--url", help="the server as teammates reach it: http://host:port (an IPv6 address "
                      "in brackets, http://[::1]:4200)")],
    auth_file: Annotated[Path, typer.Option(
        help="where the auth string is kept (made by the first call, mode 0600)")],
) -> None:
    """Print the server's and the clients' settings, as `export` lines."""
    with _errors():
        api = api_url(address)
        server, clients = team_settings(api, auth_string(auth_file))
        typer.echo("\n".join(["# the server's machine, before `prefect server start`",
                              *_exports(server),
                              "# every teammate's shell, each worker, flows.serve",
                              *_exports(clients)]))
