"""Data-parallel pretraining: `torchrun --nproc_per_node=2 -m tasks.pretrain` (gloo on the CPU)
follows the one-process run's trajectory through a signal to one process and a resume, and only
rank 0 writes."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gpt1.config import load_params
from gpt1.corpus.shards import read_split
from gpt1.model.registry import load_model
from gpt1.model.transformer import GPT1
from gpt1.presets.edit import nest, update_params
from gpt1.training.distributed import Group, from_env
from gpt1.training.pretrain import pretrain
from gpt1.training.pretrain_job import model_config
from tests.conftest import REPO, run
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
from gpt1.training import pretrain, step
os.chdir(f"rank{os.environ['RANK']}")
pretrain.loss_read_interval = lambda device, log_every: log_every
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
