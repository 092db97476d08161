"""Shared fixtures: the real data beside the repo, and throwaway copies of the repository."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NoReturn

import pytest
import torch

from gpt1.config import Params
from gpt1.presets.edit import ANALYSIS_TASKS, nest, update_params

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("GPT1_SHARED_DATA", REPO.parent / "shared" / "data"))


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist, each worker's torch takes its share of the cores: the default, every
    core in every worker, oversubscribes them."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    torch.set_num_threads(max(1, torch.get_num_threads() // workers))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The end-to-end tests (minutes each) first: each xdist worker starts on one of them and
    the short tests fill in after, rather than one long test starting last."""
    items.sort(key=lambda item: item.get_closest_marker("e2e") is None)


@pytest.fixture()
def one_torch_thread() -> Iterator[None]:
    """Tiny models run fastest, and steadiest on a busy machine, on one thread."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


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
    """Set dotted keys of the copy's params.yaml (`**{"finetune.train.lr": 0.1}`)."""
    update_params(repo / "params.yaml", nest(changes))


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
# Table 5 variant, multiple choice beside classification (the quick start's default is SST-2 alone)
E2E_ANALYSIS = {
    "finetune": {"tasks": "all"},
    "lm_eval": {"files": []},
    "analysis": {"ablation": {"variants": ["full", "no_pretrain", "no_aux", "lstm"],
                              "tasks": {"sst2": [1000], "story_cloze": [None]}},
                 "transfer": {"tasks": {"story_cloze": None, "rte": None}},
                 "zero_shot": {"tasks": {"sst2": "sentiment", "cola": "acceptability",
                                         "story_cloze": "choice", "race": "choice"}}},
}


@pytest.fixture()
def tiny_repo(tmp_path: Path, shared_data: Path) -> Path:
    """A copy of the repo on the `tiny` preset, fed one book and a slice of every task."""
    repo = copy_repo(tmp_path / "repo")
    run([sys.executable, "-m", "gpt1.cli", "preset", "tiny"], repo)
    update_params(repo / "params.yaml", E2E_ANALYSIS, ANALYSIS_TASKS)
    edit_params(repo, **{
        "ingest.root": str(shared_data),
        "ingest.corpus": ["corpus/books/pg11_alice_in_wonderland.txt"],
        "ingest.max_train_examples": 300,
        "ingest.max_dev_examples": 100,
    })
    return repo


def analysis_stages(params: Params) -> list[str]:
    """The analysis stages dvc.yaml declares for `params`, in its order: each ablation cell
    (variant by variant), each transfer task, each zero-shot task."""
    return [*(f"ablation@{variant}-{task}" for variant in params.analysis.ablation.variants
              for task in params.analysis.ablation.tasks),
            *(f"transfer@{task}" for task in params.analysis.transfer.tasks),
            *(f"zero_shot@{task}" for task in params.analysis.zero_shot.tasks)]


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
