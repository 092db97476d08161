"""Exact resume: a pretraining run stopped by SIGTERM or killed by SIGKILL, then run again, ends
with weights bit-identical to a run that was never interrupted (CPU)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

import gpt1.training.pretrain_loop
from gpt1.config import PretrainParams
from gpt1.model.registry import load_model
from gpt1.model.transformer import GPT1, GPT1Config
from gpt1.training.checkpoint import CheckpointStore, StopRequested
from gpt1.training.optim import lr_factor
from gpt1.training.pretrain_loop import WindowSampler, pretrain
from tests.conftest import read_as_off_the_cpu

pytestmark = pytest.mark.usefixtures("one_torch_thread")

CTX, VOCAB, STEPS = 8, 17, 20
CONFIG = GPT1Config(vocab_size=VOCAB, n_ctx=CTX, n_embd=32, n_layer=2, n_head=2)  # dropout 0.1


def _cfg() -> PretrainParams:
    return PretrainParams(seed=0, device="cpu", precision="fp32", batch_size=4, max_steps=STEPS,
                          lr=3e-3, warmup_steps=3, schedule="cosine", weight_decay=0.01,
                          grad_clip=1.0, eval_every=5, eval_batches=2, log_every=5,
                          checkpoint_every=3, keep_checkpoints=2, peak_tflops=1.0)


def _data() -> tuple[list[np.ndarray], list[np.ndarray]]:
    rng = np.random.default_rng(0)
    return ([rng.integers(0, VOCAB, 400).astype(np.uint16)],
            [rng.integers(0, VOCAB, 100).astype(np.uint16)])


def _model(seed: int = 0) -> GPT1:
    torch.manual_seed(seed)
    return GPT1(CONFIG)


def _assert_identical(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    different = [k for k in a if not torch.equal(a[k], b[k])]
    assert not different, f"tensors differ after resuming: {different}"


def test_sigterm_checkpoints_and_resume_is_bit_identical(tmp_path: Path) -> None:
    train, val = _data()
    reference = _model()
    seen_reference: list[tuple[int, dict[str, float]]] = []
    pretrain(reference, train, val, _cfg(), lambda s, v: seen_reference.append((s, v)))

    def stop_at_seven(step: int, values: dict[str, float]) -> None:
        if step == 7:
            os.kill(os.getpid(), signal.SIGTERM)

    store = CheckpointStore(tmp_path, "run")
    with pytest.raises(StopRequested) as stopped:
        pretrain(_model(), train, val, _cfg(), stop_at_seven, store)
    assert stopped.value.step == 7 and stopped.value.signum == signal.SIGTERM
    assert [p.name for p in store.paths()] == ["step-00000006.pt", "step-00000007.pt"]

    # a fresh process would build a differently initialised model: the checkpoint must win
    resumed = _model(seed=99)
    seen: list[tuple[int, dict[str, float]]] = []
    result = pretrain(resumed, train, val, _cfg(), lambda s, v: seen.append((s, v)), store)
    assert result.resumed_from == 7
    _assert_identical(resumed.state_dict(), reference.state_dict())
    assert seen == seen_reference  # the curves, replayed then continued, match exactly
    latest = store.latest()
    assert latest["step"] == STEPS
    # what checkpoints hold: a change here makes earlier runs' checkpoints unresumable
    assert latest.keys() == {"format", "fingerprint", "step", "model", "optimizer", "scheduler",
                             "rng", "seconds", "startup_seconds", "startup_steps",
                             "smoothed_loss", "val_loss", "history"}
    # each session's first step is timed apart: two sessions, two first steps
    assert latest["startup_steps"] == result.startup_steps == 2
    assert 0 < result.startup_seconds < result.seconds


@pytest.mark.parametrize("read_every", ["step", "log step"])
def test_a_sigterm_between_loss_reads_checkpoints_the_curves_to_its_step(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, read_every: str) -> None:
    """Off the CPU the losses are read every log_every steps: a signal that comes between two
    reads still stops after its own step, with that step's loss in the checkpoint's curves."""
    if read_every == "log step":
        read_as_off_the_cpu(monkeypatch, gpt1.training.pretrain_loop)
    train, val = _data()
    reference = _model()
    seen_reference: list[tuple[int, dict[str, float]]] = []
    pretrain(reference, train, val, _cfg(), lambda s, v: seen_reference.append((s, v)))

    batch = WindowSampler.batch

    def signalled_at_seven(self: WindowSampler, index: int, size: int):
        if index == 6:  # step 7's batch (evaluations draw 2): its loss read neither at 6 nor 7
            os.kill(os.getpid(), signal.SIGTERM)
        return batch(self, index, size)

    store = CheckpointStore(tmp_path, "run")
    seen: list[tuple[int, dict[str, float]]] = []
    with monkeypatch.context() as patch:
        patch.setattr(WindowSampler, "batch", signalled_at_seven)
        with pytest.raises(StopRequested) as stopped:
            pretrain(_model(), train, val, _cfg(), lambda s, v: seen.append((s, v)), store)
    assert stopped.value.step == 7
    assert [s for s, _ in seen] == list(range(1, 8))
    assert store.latest()["history"]["train/loss"][-1, 0] == 7
    resumed: list[tuple[int, dict[str, float]]] = []
    pretrain(_model(), train, val, _cfg(), lambda s, v: resumed.append((s, v)), store)
    assert resumed == seen_reference


def test_a_checkpoint_from_before_the_startup_was_timed_resumes(tmp_path: Path) -> None:
    train, val = _data()
    store = CheckpointStore(tmp_path, "run")
    done = pretrain(_model(), train, val, _cfg(), checkpoints=store)
    older = store.latest()
    del older["startup_seconds"], older["startup_steps"]
    store.save(STEPS, {k: v for k, v in older.items() if k not in ("format", "fingerprint",
                                                                   "step")})
    result = pretrain(_model(), train, val, _cfg(), checkpoints=store)
    assert (result.resumed_from, result.startup_steps) == (STEPS, 0)
    assert result.val_loss == done.val_loss
    assert result.tokens_per_second == pytest.approx(result.tokens / result.seconds)


def test_a_finished_run_is_not_retrained(tmp_path: Path) -> None:
    train, val = _data()
    store = CheckpointStore(tmp_path, "run")
    first = _model()
    done = pretrain(first, train, val, _cfg(), checkpoints=store)
    again = _model(seed=5)
    result = pretrain(again, train, val, _cfg(), checkpoints=store)
    assert result.resumed_from == STEPS
    assert result.val_loss == done.val_loss and result.seconds == pytest.approx(done.seconds)
    _assert_identical(again.state_dict(), first.state_dict())


def test_other_settings_start_afresh(tmp_path: Path) -> None:
    train, val = _data()
    pretrain(_model(), train, val, _cfg(), checkpoints=CheckpointStore(tmp_path, "lr=1"))
    result = pretrain(_model(), train, val, _cfg(), checkpoints=CheckpointStore(tmp_path, "lr=2"))
    assert result.resumed_from == 0


def test_extend_continues_a_shorter_run_under_the_longer_schedule(tmp_path: Path) -> None:
    train, val = _data()
    short_cfg, long_cfg = _cfg().model_copy(update={"max_steps": 10}), _cfg()
    short = CheckpointStore(tmp_path / "short", "short")
    short_model = _model()
    short_seen: list[tuple[int, dict[str, float]]] = []
    pretrain(short_model, train, val, short_cfg, lambda s, v: short_seen.append((s, v)), short)
    assert short_seen[-1][1]["lr"] == pytest.approx(0.0, abs=1e-12)  # cosine ends at zero

    longer = CheckpointStore(tmp_path / "long", "long")
    seen: list[tuple[int, dict[str, float]]] = []
    result = pretrain(_model(seed=9), train, val, long_cfg, lambda s, v: seen.append((s, v)),
                      longer, extend=short)
    assert result.resumed_from == 10 and result.steps == STEPS
    assert seen[:10] == short_seen  # the short run's curves, replayed
    # from step 10 on, the rate is the 20-step schedule's: back up from zero, then decaying
    for step, values in seen[10:]:
        expected = long_cfg.lr * lr_factor(step, long_cfg.warmup_steps, STEPS, "cosine")
        assert values["lr"] == pytest.approx(expected, rel=1e-12), step
    assert seen[10][1]["lr"] > 0.1 * long_cfg.lr
    assert [p.name for p in short.paths()] == ["step-00000009.pt", "step-00000010.pt"]  # kept

    # the extended run has checkpoints of its own now: a rerun resumes from those
    again = pretrain(_model(), train, val, long_cfg, checkpoints=longer, extend=short)
    assert again.resumed_from == STEPS


CHILD = textwrap.dedent("""
    import logging, sys, time
    from pathlib import Path
    import numpy as np, torch
    sys.path.insert(0, {tests!r})
    from test_resume import _cfg, _model
    from gpt1.training.checkpoint import CheckpointStore
    from gpt1.model.registry import save_model
    from gpt1.training.pretrain_loop import pretrain

    logging.basicConfig(level=logging.INFO)
    torch.set_num_threads(1)
    out, hang_at = Path(sys.argv[1]), int(sys.argv[2])
    train, val = [np.load(out.parent / "train.npy")], [np.load(out.parent / "val.npy")]

    def on_metrics(step, values):
        if step == hang_at:
            print("HANGING", flush=True)
            time.sleep(600)

    model = _model()
    pretrain(model, train, val, _cfg(), on_metrics, CheckpointStore(out / "ckpt", "run"))
    save_model(model, out)
""")


def _child(out: Path, hang_at: int) -> subprocess.Popen[str]:
    """A separate process pretraining into `out`; it hangs after step `hang_at` (-1: never)."""
    out.mkdir(exist_ok=True)
    script = CHILD.format(tests=str(Path(__file__).parent))
    return subprocess.Popen([sys.executable, "-c", script, str(out), str(hang_at)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(child: subprocess.Popen[str]) -> str:
    _, stderr = child.communicate(timeout=120)
    assert child.returncode == 0, stderr
    return stderr


def test_sigkill_then_resume_is_bit_identical(tmp_path: Path) -> None:
    train, val = _data()
    np.save(tmp_path / "train.npy", train[0])
    np.save(tmp_path / "val.npy", val[0])

    victim = _child(tmp_path / "run", hang_at=11)  # after the checkpoint of step 9
    assert victim.stdout.readline().strip() == "HANGING"
    victim.send_signal(signal.SIGKILL)
    victim.communicate(timeout=30)
    assert victim.returncode == -signal.SIGKILL
    assert CheckpointStore(tmp_path / "run" / "ckpt", "run").latest()["step"] == 9
    assert not (tmp_path / "run" / "model.safetensors").exists()

    stderr = _finish(_child(tmp_path / "run", hang_at=-1))
    assert "resumed from the checkpoint of step 9" in stderr
    reference = _model()  # uninterrupted, here (one thread, as in the children)
    pretrain(reference, train, val, _cfg())
    _assert_identical(load_file(tmp_path / "run" / "model.safetensors"), reference.state_dict())


def test_snapshots_through_a_stop_equal_an_uninterrupted_runs_models(tmp_path: Path) -> None:
    """Snapshots at the steps asked for, before and after a SIGTERM and resume, are whole model
    folders that load back as the models an uninterrupted run had at those steps."""
    train, val = _data()
    cfg = _cfg().model_copy(update={"snapshots": [0, 4, 7, 12, STEPS]})
    # an uninterrupted run's weights after each of those steps (stopped there, or at the end)
    expected = {}
    for step in cfg.snapshots:
        model = _model()
        if step:

            def stop(at: int, values: dict[str, float], step: int = step) -> None:
                if at == step < STEPS:
                    os.kill(os.getpid(), signal.SIGTERM)

            with contextlib.suppress(StopRequested):
                pretrain(model, train, val, _cfg(), stop,
                         CheckpointStore(tmp_path / str(step), "r"))
        expected[step] = model.state_dict()

    def stop_at_seven(step: int, values: dict[str, float]) -> None:
        if step == 7:
            os.kill(os.getpid(), signal.SIGTERM)

    store = CheckpointStore(tmp_path / "run", "run")
    with pytest.raises(StopRequested):
        pretrain(_model(), train, val, cfg, stop_at_seven, store)
    assert sorted(store.snapshots()) == [0, 4, 7]
    pretrain(_model(seed=99), train, val, cfg, checkpoints=store)
    snapshots = store.snapshots()
    assert sorted(snapshots) == cfg.snapshots
    assert not list((tmp_path / "run" / "snapshots").glob("*.tmp"))  # nothing half-written left
    for step, folder in snapshots.items():
        loaded = load_model(folder)
        assert isinstance(loaded, GPT1) and loaded.config == CONFIG
        _assert_identical(loaded.state_dict(), expected[step])
    store.clear()
    assert store.snapshots() == {}
