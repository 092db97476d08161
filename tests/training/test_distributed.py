"""Data-parallel pretraining: `torchrun --nproc_per_node=2 -m tasks.pretrain` (gloo on the CPU)
follows the one-process run's trajectory through a signal to one process and a resume, and only
rank 0 writes.

Multi-node pretraining: two `torchrun --nnodes=2` launchers, one per "node" folder, meet at a
c10d rendezvous on 127.0.0.1 (gloo) and train as one process at the global batch would; only the
node holding rank 0 writes, and after both nodes are killed the restarted pair resumes from the
checkpoint they share."""

from __future__ import annotations

import contextlib
import csv
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from gpt1.config import load_params
from gpt1.corpus.shards import read_split
from gpt1.jobs.pretrain import model_config
from gpt1.model.registry import load_model
from gpt1.model.transformer import GPT1
from gpt1.presets.edit import nest, update_params
from gpt1.training.distributed import Group, from_env
from gpt1.training.pretrain_loop import pretrain
from tests.conftest import REPO, free_port, run
from tests.token_shards import write_token_shards

pytestmark = [pytest.mark.heavy, pytest.mark.usefixtures("one_torch_thread")]

STEPS, BATCH = 10, 8
# model.dropout is 0: with dropout, 2 processes draw other masks than 1, and the runs diverge
KNOBS = {
    "model.n_ctx": 16, "model.n_embd": 32, "model.n_layer": 2, "model.n_head": 2,
    "model.dropout": 0.0,
    "pretrain.device": "cpu", "pretrain.precision": "fp32", "pretrain.batch_size": BATCH,
    "pretrain.max_steps": STEPS, "pretrain.warmup_steps": 2, "pretrain.lr": 0.003,
    "pretrain.eval_every": 5, "pretrain.eval_batches": 2, "pretrain.log_every": 5,
    "pretrain.checkpoint_every": 5, "pretrain.peak_tflops": 1.0, "pretrain.snapshots": [0, 5, 10],
}
# Each process runs the stage in its own folder; inputs and checkpoints are links to one
# shared place, so whatever else appears in a folder is what that process wrote.
LINKS = {"params.yaml": "params.yaml", "artifacts/bpe": "shared/bpe",
         "data/shards": "shared/shards", "artifacts/checkpoints": "shared/checkpoints"}
# Each rank runs the stage in its own folder, reading the losses as off the CPU (every log_every
# steps, and where the loop must); with STOP_AT set, rank 1 alone sends itself SIGTERM after that
# step, as a scheduler's signal that reaches one process of a job
IN_RANK_DIR = """\
import os, runpy, signal
from gpt1.training import pretrain_loop, step
os.chdir(f"rank{os.environ['RANK']}")
pretrain_loop.loss_read_interval = lambda device, log_every: log_every
stop_at = int(os.environ.get("STOP_AT", 0))
if os.environ["RANK"] == "1" and stop_at:
    run_step = step.TrainStep.__call__
    def then_signal(self, state, number, forward):
        run_step(self, state, number, forward)
        if number == stop_at:
            os.kill(os.getpid(), signal.SIGTERM)
    step.TrainStep.__call__ = then_signal
runpy.run_module("tasks.pretrain", run_name="__main__", alter_sys=True)
"""


def _inputs(root: Path) -> int:
    """A tokenizer, random token shards and params.yaml for a tiny model; the vocabulary size."""
    vocab = write_token_shards(root / "shared/bpe", root / "shared/shards",
                               {"train": 3000, "val": 500}, 2000)
    (root / "shared/checkpoints").mkdir()
    (root / "params.yaml").write_bytes((REPO / "params.yaml").read_bytes())
    update_params(root / "params.yaml", nest(KNOBS))
    return vocab


def _rank_dirs(root: Path, processes: int) -> None:
    for rank in range(processes):
        for link, target in LINKS.items():
            path = root / f"rank{rank}" / link
            path.parent.mkdir(parents=True, exist_ok=True)
            path.symlink_to(root / target)


def _torchrun(root: Path, processes: int, env: dict[str, str] | None = None,
              check: bool = True) -> subprocess.CompletedProcess:
    (root / "in_rank_dir.py").write_text(IN_RANK_DIR)
    return run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                f"--nproc_per_node={processes}", "in_rank_dir.py"], root, timeout=300,
               env={"OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO), **(env or {})},
               check=check)


def _written(folder: Path) -> set[str]:
    """Files under `folder`, not following the links to the shared inputs."""
    return {str(Path(d, f).relative_to(folder)) for d, _, files in os.walk(folder)
            for f in files if not Path(d, f).is_symlink()}


def _dvclive_series(root: Path, name: str) -> list[tuple[int, float]]:
    with (root / "dvclive/pretrain/plots/metrics" / f"{name}.tsv").open() as fh:
        return [(int(r["step"]), float(r[name.split("/")[-1]]))
                for r in csv.DictReader(fh, delimiter="\t")]


def one_process(root: Path, vocab: int) -> tuple[GPT1, dict[str, list[tuple[int, float]]]]:
    """The stage's run on `root`'s inputs as one process at the global batch, here: the model
    it trains and the curves it reports (what several processes must reproduce)."""
    params = load_params(root / "params.yaml")
    torch.manual_seed(params.pretrain.seed)  # as the stage builds its model
    model = GPT1(model_config(params, vocab))
    seen: dict[str, list[tuple[int, float]]] = {"train/loss": [], "val/loss": []}

    def on_metrics(step: int, values: dict[str, float]) -> None:
        for name in seen.keys() & values.keys():
            seen[name].append((step, values[name]))

    shards = root / "shared/shards"
    pretrain(model, read_split(shards / "train"), read_split(shards / "val"), params.pretrain,
             on_metrics)
    return model, seen


def assert_same_trajectory(folder: Path, model: GPT1,
                           seen: dict[str, list[tuple[int, float]]]) -> None:
    """The stage's curves and model in `folder` are `one_process`'s to rounding."""
    for name, expected in seen.items():
        got = _dvclive_series(folder, name)
        assert [s for s, _ in got] == [s for s, _ in expected]
        torch.testing.assert_close(torch.tensor([v for _, v in got], dtype=torch.float64),
                                   torch.tensor([v for _, v in expected], dtype=torch.float64),
                                   rtol=1e-5, atol=0)
    trained = load_model(folder / "artifacts/pretrain").state_dict()
    for key, value in model.state_dict().items():
        torch.testing.assert_close(trained[key], value, rtol=1e-4, atol=1e-5, msg=key)


def test_two_processes_follow_the_one_process_trajectory_through_a_stop(tmp_path: Path) -> None:
    """2 processes at 4 rows each = 1 process at 8 rows: the same losses and weights to rounding
    (measured: losses within 2e-7 relative, weights within 3e-6 absolute), with dropout 0, through
    a stop and a resume. Off the CPU the processes ask each other for a signal only where they
    read the losses (asking waits for the device): SIGTERM to rank 1 alone after step 6, losses
    read every 4 steps and at the checkpoint of step 5, stops both after step 8, checkpointed;
    run again, they resume from there."""
    vocab = _inputs(tmp_path)
    update_params(tmp_path / "params.yaml", nest({"pretrain.log_every": 4}))
    _rank_dirs(tmp_path, 2)
    stopped = _torchrun(tmp_path, 2, env={"STOP_AT": "6"}, check=False)
    log = stopped.stdout + stopped.stderr
    assert stopped.returncode != 0, log
    assert "pretraining stopped: SIGTERM at step 8" in log, log
    resumed = _torchrun(tmp_path, 2)
    assert "resumed from the checkpoint of step 8" in resumed.stdout + resumed.stderr
    model, seen = one_process(tmp_path, vocab)
    rank0 = tmp_path / "rank0"
    assert_same_trajectory(rank0, model, seen)

    # only rank 0 wrote: the model, the metrics, the curves and (shared) the checkpoints
    assert _written(tmp_path / "rank1") == set()
    written = _written(rank0)
    assert {"artifacts/pretrain/model.safetensors", "artifacts/pretrain/tokenizer.json",
            "metrics/pretrain.json"} <= written
    assert any(path.startswith("dvclive/pretrain/") for path in written)
    metrics = json.loads((rank0 / "metrics/pretrain.json").read_text())
    assert metrics["steps"] == STEPS and metrics["compute"]["processes"] == 2
    assert metrics["peak_tflops"] == 2.0  # MFU's denominator: both processes' peak
    [run] = (tmp_path / "shared/checkpoints/pretrain").iterdir()  # one folder: one setting
    assert sorted(p.name for p in run.iterdir()) == [  # the newest 2 (pretrain.keep_checkpoints)
        "run.json", "snapshots", *(f"step-{s:08d}.{ext}" for s in (8, 10)
                                   for ext in ("pt", "sha256"))]
    # the snapshot steps reached (of params.yaml's), written once, by rank 0
    params = load_params(tmp_path / "params.yaml")
    reached = [s for s in params.pretrain.snapshots if s <= STEPS]
    assert sorted(p.name for p in (run / "snapshots").iterdir()) == [
        f"step-{s:08d}" for s in reached] and len(reached) >= 2


def test_batch_must_split_evenly_over_the_processes() -> None:
    params = load_params(REPO / "params.yaml")
    cfg = params.pretrain.model_copy(update={"batch_size": 8, "device": "cpu"})
    model = GPT1(model_config(params, 100))
    with pytest.raises(ValueError, match=r"batch_size \(8\) is the global batch: it must be "
                                         r"divisible by the number of processes \(3\)"):
        pretrain(model, [], [], cfg, group=Group(rank=0, world_size=3))


def test_each_process_takes_its_rows_and_one_process_needs_no_group() -> None:
    assert [Group(rank=r, world_size=2).rows(8) for r in (0, 1)] == [slice(0, 4), slice(4, 8)]
    assert Group().rows(8) == slice(0, 8)
    single = from_env({})
    assert (single.rank, single.world_size, single.is_main, single.parallel) == (0, 1, True, False)
    assert single.mean(2.5) == 2.5 and single.means([1.0, 2.5]) == [1.0, 2.5]
    assert single.max(3) == 3
    assert single.gather("x") == ["x"] and single.from_main("x") == "x"
    assert from_env({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"}) == Group(1, 2, 1)
    assert not Group(1, 2, 1).is_main



NODES = ("nodeA", "nodeB")
RANK0_SAYS = "parameters on 2 x cpu"  # rank 0 alone logs at INFO (tasks/stage.py)
HANG_AT = 5  # a checkpoint step of test_ddp's KNOBS
HANGING = f"hanging after the checkpoint of step {HANG_AT}"
# The stage, except that every process stops moving once the checkpoint of HANG_AT is on disk:
# the nodes are then killed at a known step, however fast the steps run.
HANG = f"""\
import runpy, sys, time
import gpt1.training.pretrain_loop as library
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
