"""Multi-node pretraining: two `torchrun --nnodes=2` launchers, one per "node" folder, meet at a
c10d rendezvous on 127.0.0.1 (gloo) and train as one process at the global batch would; only the
node holding rank 0 writes, and after both nodes are killed the restarted pair resumes from the
checkpoint they share."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO, free_port
from tests.test_ddp import LINKS, STEPS, _inputs, _written, assert_same_trajectory, one_process

pytestmark = [pytest.mark.heavy, pytest.mark.usefixtures("one_torch_thread")]

NODES = ("nodeA", "nodeB")
RANK0_SAYS = "parameters on 2 x cpu"  # rank 0 alone logs at INFO (tasks/stage.py)
HANG_AT = 5  # a checkpoint step of test_ddp's KNOBS
HANGING = f"hanging after the checkpoint of step {HANG_AT}"
# The stage, except that every process stops moving once the checkpoint of HANG_AT is on disk:
# the nodes are then killed at a known step, however fast the steps run.
HANG = f"""\
import runpy, sys, time
import gpt1.training.pretrain as library
save = library.save_checkpoint

def save_then_hang(state, *args, **kwargs):
    path = save(state, *args, **kwargs)
    if state.step == {HANG_AT}:
        print({HANGING!r}, file=sys.stderr, flush=True)
        time.sleep(600)
    return path

library.save_checkpoint = save_then_hang
runpy.run_module("tasks.pretrain", run_name="__main__", alter_sys=True)
"""
STAGE = ["-m", "tasks.pretrain"]


@dataclass(frozen=True)
class Node:
    """One "machine": its launcher, the folder it runs in and its launcher's output."""

    name: str
    folder: Path
    log: Path
    launcher: subprocess.Popen[bytes]

    def says(self, text: str) -> bool:
        return text in self.log.read_text()


def _node_folders(root: Path) -> None:
    """Each node's checkout: links to the shared inputs and checkpoints (as test_ddp's ranks)."""
    for node in NODES:
        for link, target in LINKS.items():
            path = root / node / link
            path.parent.mkdir(parents=True, exist_ok=True)
            path.symlink_to(root / target)


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (torchrun's workers, which run in sessions of
    their own, so that killing the launcher's process group leaves them running)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(stat.parent.name))
    return found


def _alive(pid: int) -> bool:
    """Whether `pid` still runs (a zombie waiting for its reaper does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _kill(node: Node) -> None:
    """SIGKILL the node as a power cut would: the launcher's process group and its workers'."""
    for pid in [node.launcher.pid, *_children(node.launcher.pid)]:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(os.getpgid(pid), signal.SIGKILL)


def _logs(nodes: Iterable[Node]) -> str:
    """The end of each launcher's output, for a failure's message."""
    return "\n".join(f"--- {node.name}\n{node.log.read_text()[-3000:]}" for node in nodes)


def _wait_for(done: Callable[[], bool], what: str, nodes: list[Node], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} after {timeout}s\n{_logs(nodes)}")
        time.sleep(0.1)


@contextlib.contextmanager
def _launch(root: Path, session: str, target: list[str], port: int,
            order: Iterable[str] = NODES) -> Iterator[list[Node]]:
    """Both nodes' launchers running `target`, meeting at 127.0.0.1:`port`; on the way out,
    whatever of them still runs is killed."""
    nodes: list[Node] = []
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    try:
        for name in order:
            log = root / f"{session}-{name}.log"  # beside the node folders, not in them
            with log.open("wb") as out:
                launcher = subprocess.Popen(
                    [sys.executable, "-m", "torch.distributed.run", "--nnodes=2",
                     "--nproc-per-node=1", "--rdzv-backend=c10d",
                     f"--rdzv-endpoint=127.0.0.1:{port}", "--rdzv-id=pretrain",
                     "--rdzv-conf=join_timeout=60", "--local-addr=127.0.0.1", "--max-restarts=0",
                     *target],
                    cwd=root / name, env=env, stdout=out, stderr=subprocess.STDOUT,
                    start_new_session=True)
            nodes.append(Node(name, root / name, log, launcher))
        yield nodes
    finally:
        for node in nodes:
            if node.launcher.poll() is None:
                _kill(node)
                node.launcher.wait(timeout=30)


def _finish(nodes: list[Node]) -> None:
    """Wait, bounded, for both launchers to end; fail with their output unless both exit 0."""
    for node in nodes:
        try:
            code = node.launcher.wait(timeout=180)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{node.name} still running after 180s\n{_logs(nodes)}")
        assert code == 0, _logs(nodes)


def _rank0(nodes: list[Node]) -> tuple[Node, Node]:
    """The node that held rank 0 and the other: the c10d rendezvous assigns the ranks, and rank
    0's INFO lines show in its launcher's output alone."""
    [main] = [node for node in nodes if node.says(RANK0_SAYS)]
    [other] = [node for node in nodes if node is not main]
    return main, other


def _stamps(folder: Path) -> dict[str, int]:
    """What `folder` holds that the stage wrote, with modification times: to tell that nothing
    was written there since."""
    return {path: (folder / path).stat().st_mtime_ns for path in _written(folder)}


def test_two_nodes_follow_the_one_process_trajectory(tmp_path: Path) -> None:
    """2 nodes of 1 process at 4 rows each = 1 process at 8 rows, to test_ddp's tolerances, and
    the node without rank 0 writes nothing."""
    vocab = _inputs(tmp_path)
    _node_folders(tmp_path)
    with _launch(tmp_path, "run", STAGE, free_port()) as nodes:
        _finish(nodes)
    main, other = _rank0(nodes)
    assert_same_trajectory(main.folder, *one_process(tmp_path, vocab))

    assert _written(other.folder) == set()
    assert {"artifacts/pretrain/model.safetensors", "artifacts/pretrain/tokenizer.json",
            "metrics/pretrain.json"} <= _written(main.folder)
    [run] = (tmp_path / "shared/checkpoints/pretrain").iterdir()
    assert sorted(p.name for p in run.glob("step-*.pt")) == [
        "step-00000005.pt", f"step-{STEPS:08d}.pt"]


def test_both_nodes_killed_then_restarted_resume_from_the_shared_checkpoint(
        tmp_path: Path) -> None:
    """SIGKILL both nodes (launchers and workers) after the checkpoint of step 5; started again,
    they resume from it and end where the uninterrupted one-process run does."""
    vocab = _inputs(tmp_path)
    _node_folders(tmp_path)
    (tmp_path / "hang.py").write_text(HANG)
    port = free_port()
    with _launch(tmp_path, "killed", [str(tmp_path / "hang.py")], port) as nodes:
        _wait_for(lambda: all(node.says(HANGING) for node in nodes),
                  f"'{HANGING}' from both nodes", nodes, timeout=180)
        workers = [pid for node in nodes for pid in _children(node.launcher.pid)]
        assert len(workers) == 2
        for node in nodes:
            _kill(node)
        assert [node.launcher.wait(timeout=30) for node in nodes] == [-signal.SIGKILL] * 2
        _wait_for(lambda: not any(map(_alive, workers)), "end of the killed workers", nodes,
                  timeout=30)
    [run] = (tmp_path / "shared/checkpoints/pretrain").iterdir()
    assert [p.name for p in run.glob("step-*.pt")] == [f"step-{HANG_AT:08d}.pt"]
    checkpoint_written = (run / f"step-{HANG_AT:08d}.pt").stat().st_mtime_ns
    killed_main, killed_other = _rank0(nodes)
    assert _written(killed_other.folder) == set()
    assert "artifacts/pretrain/model.safetensors" not in _written(killed_main.folder)
    before = {node.name: _stamps(node.folder) for node in nodes}

    # the same commands again, the other launcher first: rank 0 may land on either node now
    with _launch(tmp_path, "resumed", STAGE, port, order=reversed(NODES)) as nodes:
        _finish(nodes)
    main, other = _rank0(nodes)
    assert main.says(f"resumed from the checkpoint of step {HANG_AT}")
    assert (run / f"step-{HANG_AT:08d}.pt").stat().st_mtime_ns == checkpoint_written  # reused
    assert _stamps(other.folder) == before[other.name]  # it wrote nothing this time either
    assert_same_trajectory(main.folder, *one_process(tmp_path, vocab))
