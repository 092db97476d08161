"""Shared fixtures: the real data beside the repo, throwaway copies of the repository, and one
tiny pipeline reproduced once per test run for every test that starts from a finished run."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import NoReturn

import pytest
import torch
from filelock import FileLock

from bench.common import DATA as SHARED_DATA
from flows.serve import SERVER_PID, start_server
from gpt1 import dag
from gpt1.config import ServerParams, read_yaml
from gpt1.presets.edit import ANALYSIS_TASKS, set_keys, update_params
from gpt1.training.step import StepLoss, TrainStep

# torch.compile's first compile in a process probes each vector ISA of the CPU by building and
# loading a test library: 10 s of g++ per process (of a tiny model's 30 s compile). Trust the
# CPU's flags instead, as inductor does when this is set. Before torch compiles anything, and
# inherited by the processes the tests start.
os.environ.setdefault("TORCHINDUCTOR_VEC_ISA_OK", "1")
REPO = Path(__file__).resolve().parents[1]
# The folder of the Prefect server the whole test run shares (`prefect_api`): chosen by the
# controlling process, inherited by its xdist workers, stopped and removed when the run ends
SHARED_SERVER_HOME = "GPT1_TESTS_PREFECT_HOME"


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist, each worker's torch takes its share of the cores, and so do the
    processes its tests start (stages under `dvc repro`, flows): the default, every core in every
    process, oversubscribes them."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    threads = max(1, torch.get_num_threads() // workers)
    torch.set_num_threads(threads)
    os.environ["OMP_NUM_THREADS"] = str(threads)
    if not hasattr(config, "workerinput"):  # the controlling process (or the only one)
        os.environ[SHARED_SERVER_HOME] = tempfile.mkdtemp(prefix="gpt1-tests-prefect-")


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The controlling process, once every worker is done, stops the shared Prefect server."""
    if hasattr(session.config, "workerinput"):
        return
    home = Path(os.environ.pop(SHARED_SERVER_HOME))
    pid_file = home / SERVER_PID
    if pid_file.is_file():
        _stop_group(int(pid_file.read_text()))
    shutil.rmtree(home, ignore_errors=True)


def _stop_group(pgid: int, grace: float = 30) -> None:
    """SIGTERM to process group `pgid`, SIGKILL to what is left of it after `grace` seconds."""
    deadline = time.monotonic() + grace
    try:
        os.killpg(pgid, signal.SIGTERM)
        while time.monotonic() < deadline:
            time.sleep(0.2)
            with contextlib.suppress(ChildProcessError):  # reaped, where it is our child (-n0)
                os.waitpid(pgid, os.WNOHANG)
            os.killpg(pgid, 0)
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The first test that needs the shared reproduced pipeline leads (it builds it, for two
    minutes); the end-to-end tests that build their own follow (minutes each: no long test
    starts last), then the short tests; the other users of the shared pipeline come last. So
    while one xdist worker builds it, the other has work of its own, rather than waiting on the
    build's lock with a test that needs it. Within each of these, the tests marked `long` (a
    minute or more) start first: one of them started last would leave the other worker idle."""
    def group(item: pytest.Item) -> int:
        if "reproduced_once" in getattr(item, "fixturenames", ()):  # direct, or by `reproduced`
            return 3
        return 1 if item.get_closest_marker("e2e") is not None else 2

    items.sort(key=lambda item: (group(item), item.get_closest_marker("long") is None))
    builder = next((i for i, item in enumerate(items) if group(item) == 3), None)
    if builder is not None:
        items.insert(0, items.pop(builder))


@pytest.fixture()
def one_torch_thread() -> Iterator[None]:
    """Tiny models run fastest, and steadiest on a busy machine, on one thread."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture()
def loss_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The steps at which training loops read their losses: the latest step of each read that
    `TrainStep.read_losses` returned."""
    reads: list[int] = []
    read_losses = TrainStep.read_losses

    def recorded(self: TrainStep, *args: object, **kwargs: object) -> list[StepLoss]:
        read = read_losses(self, *args, **kwargs)
        reads.extend([r.step for r in read][-1:])
        return read

    monkeypatch.setattr(TrainStep, "read_losses", recorded)
    return reads


@pytest.fixture()
def device_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The reads of tensors' values into the host (`item`, `tolist`, `cpu`, `numpy`), by name, in
    order: each makes the host wait for a GPU."""
    reads: list[str] = []
    for name in ("item", "tolist", "cpu", "numpy"):
        read = getattr(torch.Tensor, name)

        def recorded(self: torch.Tensor, *args: object, _read=read, _name=name,
                     **kwargs: object) -> object:
            reads.append(_name)
            return _read(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, recorded)
    return reads


def read_as_off_the_cpu(monkeypatch: pytest.MonkeyPatch, loop: ModuleType) -> None:
    """`loop` (a training loop's module) reads its losses on the CPU as it does on a GPU: every
    log_every steps rather than every step."""
    monkeypatch.setattr(loop, "loss_read_interval", lambda device, log_every: log_every)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """`../shared/data`; under CI=true its absence fails the test instead of skipping it."""
    if not (SHARED_DATA / "glue" / "SST-2" / "train.tsv").is_file():
        skip_outside_ci(f"real data not found at {SHARED_DATA} (set GPT1_SHARED_DATA)")
    return SHARED_DATA


def skip_outside_ci(message: str) -> NoReturn:
    """Skip the test for want of `message`'s resource; under CI=true, which has every resource
    the suite needs, fail it instead: a skip there would hide what it should have checked."""
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture()
def small_disk(tmp_path: Path) -> Iterator[Callable[[int], Path]]:
    """`small_disk(kib)`: a new file system of that size (a tmpfs, mounted as root) on which a
    write fails with ENOSPC as on a full disk. Without the right to mount it skips, except under
    CI=true, where that fails the test."""
    mounts: list[Path] = []

    def mount(kib: int) -> Path:
        point = tmp_path / f"disk{len(mounts)}"
        point.mkdir()
        proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={kib}k", "tmpfs", str(point)],
                              capture_output=True, text=True)
        if proc.returncode:
            skip_outside_ci(f"cannot mount a small tmpfs to fill ({proc.stderr.strip()})")
        mounts.append(point)
        return point

    yield mount
    for point in mounts:
        subprocess.run(["umount", "-l", str(point)], check=False)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def prefect_api() -> str:
    """The API URL of a Prefect server shared by the whole test run, for flow runs whose test is
    about the flow, not Prefect's temporary server: a flow run started without PREFECT_API_URL
    starts one of those, 10-20 s with its database's migrations, every time. The first xdist
    worker to ask starts it; the controlling process stops it (`pytest_sessionfinish`)."""
    home = Path(os.environ[SHARED_SERVER_HOME])
    url_file = home / "api_url"
    with FileLock(str(home / "start.lock")):
        if not url_file.is_file():
            _, url = start_server(home, ServerParams(host="127.0.0.1", port=free_port()))
            url_file.write_text(url)
    return url_file.read_text()


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None,
        timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess:
    """Run a command; with `check`, fail the test with its output if it exits non-zero."""
    # dvc.yaml's commands run `python`: make it this interpreter, activated or not
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PATH": path, **(env or {})})
    if check and proc.returncode:
        pytest.fail(f"{' '.join(cmd)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def dvc(*args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    return run([sys.executable, "-m", "dvc", *args], cwd, check=check)


def edit_params(repo: Path, **changes: object) -> None:
    """Set dotted keys of the copy's params.yaml (`**{"finetune.train.lr": 0.1}`), each whole,
    as `gpt1 set` does: a mapping given replaces the key's mapping; and dag.yaml after it, as
    `gpt1 set` writes it."""
    set_keys(repo / "params.yaml", changes)
    dag.write(repo)


def copy_repo(dest: Path) -> Path:
    """The repository's tracked and untracked-but-not-ignored files in a fresh git repo."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout.split("\0")
    for rel in filter(None, listed):
        src = REPO / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    git = ["git", "-c", "user.email=test@gpt1.local", "-c", "user.name=gpt1 tests"]
    run(["git", "init", "-q"], dest)
    run([*git, "add", "-A"], dest)
    run([*git, "commit", "-qm", "copy"], dest)  # DVCLive needs a commit to stand on
    return dest


# What the end-to-end runs fine-tune and analyse on the real data: a task of every family, every
# Table 5 variant at two train sizes and two seeds, multiple choice beside classification, a task
# without data (QNLI), a book kept out of pretraining (the quick start's default is SST-2 alone)
HELD_OUT_BOOK = "corpus/books/pg74_tom_sawyer.txt"  # tiny_repo pretrains on Alice alone
E2E_ANALYSIS = {
    "finetune": {"tasks": "all"},
    "lm_eval": {"files": [HELD_OUT_BOOK]},
    "analysis": {"seeds": [7, 8],
                 "ablation": {"variants": ["full", "no_pretrain", "no_aux", "lstm"],
                              "tasks": {"sst2": [60, 120], "story_cloze": [100],
                                        "qnli": [None]}},
                 "transfer": {"tasks": {"story_cloze": 100, "rte": 60}},
                 "zero_shot": {"tasks": {"sst2": "sentiment", "cola": "acceptability",
                                         "story_cloze": "choice", "race": "choice"},
                               "max_examples": 40}},
}


# The registry's tasks the end-to-end runs keep: those whose data ../shared/data holds, and two
# it lacks (QNLI, fine-tuned and ablated; RACE, scored zero-shot), which `finetune.tasks: all`
# must leave out of the DAG (no stage of theirs exists: gpt1.dag) and the report must list as
# not run, with why. The four other absent tasks would only repeat that, a line of the report
# each. The DAG they make: 28 stages (code .. tokenize, pretrain and its LSTM control, six
# fine-tunes, lm_eval, eight Table 5 cells, two transfers, three zero-shots, the report).
E2E_TASKS = ["cola", "sst2", "qnli", "rte", "mrpc", "stsb", "story_cloze", "race"]


def make_tiny_repo(dest: Path, shared_data: Path) -> Path:
    """A copy of the repo in `dest` on the `tiny` preset, fed one book and a slice of every
    task of `E2E_TASKS`, fine-tuned and analysed as `E2E_ANALYSIS` says."""
    repo = copy_repo(dest)
    run([sys.executable, "-m", "gpt1.cli", "preset", "tiny"], repo)
    update_params(repo / "params.yaml", E2E_ANALYSIS, ANALYSIS_TASKS)
    registry = read_yaml((repo / "params.yaml").read_text(encoding="utf-8"))["tasks"]
    edit_params(repo, tasks={task: registry[task] for task in E2E_TASKS})
    edit_params(repo, **{
        "ingest.root": str(shared_data),
        "ingest.corpus": ["corpus/books/pg11_alice_in_wonderland.txt"],
        "ingest.max_train_examples": 300,
        "ingest.max_dev_examples": 100,
        "ingest.max_test_examples": 100,
    })
    return repo


@pytest.fixture()
def tiny_repo(tmp_path: Path, shared_data: Path) -> Path:
    """`make_tiny_repo` in this test's folder: nothing run yet."""
    return make_tiny_repo(tmp_path / "repo", shared_data)


def keep_only_tasks(repo: Path, tasks: list[str]) -> None:
    """Cut the copy's task registry to `tasks`, and fine-tune each: `finetune@<task>` stages
    for those alone (gpt1.dag), and no line of the report about the others. The analyses must
    name none of the others by then."""
    registry = read_yaml((repo / "params.yaml").read_text(encoding="utf-8"))["tasks"]
    edit_params(repo, **{"tasks": {task: registry[task] for task in tasks},
                         "finetune.tasks": list(tasks)})


def only_sst2(repo: Path) -> None:
    """Cut the tiny DAG to SST-2 alone (12 stages, not 28: code .. pretrain, finetune@sst2,
    lm_eval, one stage of each analysis, the report), for a test of the plumbing around the
    stages rather than of the stages: each stage costs a `dvc repro` of a few seconds."""
    edit_params(repo, **{
        "lm_eval.files": [],
        "analysis.seeds": [1],
        "analysis.ablation.variants": ["full"],
        "analysis.ablation.tasks": {"sst2": [60]},
        "analysis.transfer.tasks": {"sst2": 60},
        "analysis.zero_shot.tasks": {"sst2": "sentiment"},
        "analysis.zero_shot.max_examples": 40,
    })
    keep_only_tasks(repo, ["sst2"])


def shared_sst2(repo: Path) -> None:
    """Cut a copy of the shared reproduced pipeline (`reproduced`) to its SST-2 stages (15 of
    28: code .. pretrain, pretrain_control@lstm, finetune@sst2, lm_eval, the four Table 5 cells
    of SST-2, zero_shot@sst2, the report): all still up to date but ingest, which reads the task
    registry (its outputs for SST-2 unchanged), and the report. For tests of what runs the
    stages, which visit each one for a few seconds even where DVC skips it."""
    edit_params(repo, **{
        "analysis.ablation.tasks": {"sst2": E2E_ANALYSIS["analysis"]["ablation"]["tasks"]["sst2"]},
        "analysis.transfer.tasks": {},
        "analysis.zero_shot.tasks": {"sst2": "sentiment"},
    })
    keep_only_tasks(repo, ["sst2"])


@dataclass(frozen=True)
class Reproduced:
    """A tiny repo after its first `dvc repro`, and what that `dvc repro` printed."""

    repo: Path
    stdout: str
    stderr: str


def built_once(tmp_path_factory: pytest.TempPathFactory, worker_id: str, name: str,
               build: Callable[[Path], None]) -> Path:
    """The folder `name` that `build(folder)` fills, built once for the whole test run: the
    first xdist worker to ask builds it (in `<name>.partial`, renamed when done) while the
    others wait on a file lock. After a build that raises there is no folder `name`: the next
    worker to ask builds it again."""
    run_dir = tmp_path_factory.getbasetemp()
    if worker_id != "master":
        run_dir = run_dir.parent  # this run's folder, which its xdist workers share
    home = run_dir / name
    with FileLock(str(run_dir / f"{name}.lock")):
        if not home.is_dir():
            partial = home.with_name(f"{name}.partial")
            shutil.rmtree(partial, ignore_errors=True)
            partial.mkdir()
            build(partial)
            partial.rename(home)
    return home


@pytest.fixture(scope="session")
def reproduced_once(tmp_path_factory: pytest.TempPathFactory, worker_id: str,
                    shared_data: Path) -> Reproduced:
    """`tiny_repo` after `dvc repro`, built once for the whole test run (`built_once`). Tests
    never touch it: `reproduced` gives each its own copy. A failed `dvc repro` fails every test
    that needs it, with its output, without running it again."""

    def build(built: Path) -> None:
        repo = make_tiny_repo(built / "repo", shared_data)
        proc = run([sys.executable, "-m", "dvc", "repro"], repo, timeout=1800, check=False)
        (built / "stdout.txt").write_text(proc.stdout)
        (built / "stderr.txt").write_text(proc.stderr)
        (built / "returncode.txt").write_text(str(proc.returncode))

    home = built_once(tmp_path_factory, worker_id, "reproduced", build)
    stdout, stderr = (home / "stdout.txt").read_text(), (home / "stderr.txt").read_text()
    if int((home / "returncode.txt").read_text()):
        pytest.fail(f"the shared tiny pipeline failed to reproduce:\n{stdout}\n{stderr}")
    return Reproduced(home / "repo", stdout, stderr)


@pytest.fixture()
def reproduced(reproduced_once: Reproduced, tmp_path: Path) -> Reproduced:
    """This test's own copy of the tiny pipeline reproduced once per run (`reproduced_once`):
    every stage up to date, as after the first `dvc repro` of `tiny_repo`."""
    repo = tmp_path / "repo"
    shutil.copytree(reproduced_once.repo, repo, symlinks=True)
    return Reproduced(repo, reproduced_once.stdout, reproduced_once.stderr)


def assert_tables_well_formed(lines: list[str]) -> None:
    """Each table: a header, a rule of dashes and colons, rows, all with the header's columns."""
    for i, line in enumerate(lines):
        if line.startswith("|") and not lines[i - 1].startswith("|"):
            width = line.count("|")
            assert lines[i + 1].count("|") == width and set(lines[i + 1]) <= set("|-:")
            k = i + 2
            while k < len(lines) and lines[k].startswith("|"):
                assert lines[k].count("|") == width, lines[k]
                k += 1


@pytest.fixture()
def stage_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A checkout's dvc.yaml, params.yaml and dag.yaml in a DVC project, and the environment
    DVC gives a stage's command."""
    from dvc.repo import Repo  # DVC's import only where a test asks for it

    for name in ("dvc.yaml", "params.yaml", "dag.yaml"):
        shutil.copy(REPO / name, tmp_path / name)
    Repo.init(str(tmp_path), no_scm=True).close()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DVC_ROOT", str(tmp_path))
    monkeypatch.setenv("DVC_STAGE", "pretrain")
    return tmp_path
