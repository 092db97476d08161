"""gpt1.training.checkpoint: atomic, code-free checkpoints; the newest good one of this run wins."""

from __future__ import annotations

import errno
import hashlib
import io
import json
import logging
import os
import pickle
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from gpt1.training.checkpoint import (
    RUN_FILE,
    CheckpointRuns,
    CheckpointStore,
    StopRequested,
    StopSignals,
    rng_state,
    set_rng_state,
    settings_fingerprint,
)


def _state(value: float) -> dict[str, object]:
    return {"model": {"w": torch.full((2, 3), value)}, "history": [1, 2.5, "x"],
            "nested": {"lr": value}}


def test_save_then_latest_round_trips(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path, "abc")
    path = store.save(7, _state(1.5))
    assert path == tmp_path / "step-00000007.pt"
    loaded = store.latest()
    assert loaded is not None
    assert loaded["step"] == 7 and loaded["fingerprint"] == "abc"
    assert torch.equal(loaded["model"]["w"], torch.full((2, 3), 1.5))
    assert loaded["history"] == [1, 2.5, "x"] and loaded["nested"] == {"lr": 1.5}
    # no temp files left; the digest is sha256sum's own format
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-00000007.pt",
                                                          "step-00000007.sha256"]
    check = subprocess.run(["sha256sum", "--check", "step-00000007.sha256"], cwd=tmp_path,
                           capture_output=True, text=True)
    assert check.returncode == 0 and check.stdout == "step-00000007.pt: OK\n"


def test_keeps_only_the_newest(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path, "abc", keep=2)
    for step in (10, 20, 30, 100):
        store.save(step, _state(step))
    assert [p.name for p in store.paths()] == ["step-00000030.pt", "step-00000100.pt"]
    assert sorted(p.name for p in tmp_path.glob("*.sha256")) == ["step-00000030.sha256",
                                                                 "step-00000100.sha256"]
    assert store.latest()["step"] == 100  # numeric order, not the order of the file names' digits


def test_unreadable_newest_falls_back_to_the_previous(tmp_path: Path,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    store = CheckpointStore(tmp_path, "abc")
    store.save(1, _state(1.0))
    newest = store.save(2, _state(2.0))
    newest.write_bytes(newest.read_bytes()[:100])  # cut short, as by a copy that died
    with caplog.at_level(logging.WARNING, logger="gpt1.training.checkpoint"):
        state = store.latest()
    assert state is not None and state["step"] == 1
    assert ("step-00000002.pt: its sha256 is not the one step-00000002.sha256 recorded when it "
            "was written (damaged since), trying an older one") in caplog.text


def test_a_flipped_bit_in_the_tensors_is_caught(tmp_path: Path,
                                                caplog: pytest.LogCaptureFixture) -> None:
    """torch.load does not check the zip's CRCs: a flipped bit in tensor data loads as other
    weights; the recorded sha256 catches it, and the previous checkpoint is resumed."""
    store = CheckpointStore(tmp_path, "abc")
    store.save(1, _state(1.0))
    newest = store.save(2, _state(2.0))
    data = bytearray(newest.read_bytes())
    offset = data.index(torch.full((2, 3), 2.0).numpy().tobytes())  # the stored tensor's bytes
    data[offset] ^= 0x01
    newest.write_bytes(bytes(data))
    flipped = torch.load(newest, weights_only=True)["model"]["w"]  # loads, silently wrong
    assert not torch.equal(flipped, torch.full((2, 3), 2.0))
    with caplog.at_level(logging.WARNING, logger="gpt1.training.checkpoint"):
        state = store.latest()
    assert state is not None and state["step"] == 1
    assert "step-00000002.pt: its sha256 is not the one" in caplog.text


def test_a_checkpoint_without_its_digest_is_not_resumed(tmp_path: Path,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    store = CheckpointStore(tmp_path, "abc")
    store.save(1, _state(1.0))
    store.save(2, _state(2.0))
    (tmp_path / "step-00000002.sha256").unlink()  # as if the write stopped in between
    with caplog.at_level(logging.WARNING, logger="gpt1.training.checkpoint"):
        assert store.latest()["step"] == 1
    assert "no sha256 recorded in step-00000002.sha256 (its write was cut short)" in caplog.text


class _Exploit:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, ("touch pwned",))


@pytest.mark.filterwarnings("ignore:Detected pickle protocol:UserWarning")
def test_loading_executes_no_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = CheckpointStore(tmp_path / "ckpt", "abc")
    store.save(1, _state(1.0))
    exploit = tmp_path / "ckpt" / "step-00000002.pt"
    exploit.write_bytes(pickle.dumps(_Exploit()))
    digest = hashlib.sha256(exploit.read_bytes()).hexdigest()  # its digest passes: load it
    (tmp_path / "ckpt" / "step-00000002.sha256").write_text(f"{digest}  {exploit.name}\n")
    state = store.latest()
    assert not (tmp_path / "pwned").exists()  # weights_only refused to build the object
    assert state is not None and state["step"] == 1


def test_other_settings_are_not_resumed(tmp_path: Path) -> None:
    CheckpointStore(tmp_path, "old").save(5, _state(5.0))
    store = CheckpointStore(tmp_path, "new")
    assert store.latest() is None
    store.clear()
    assert store.paths() == []


def test_a_failed_write_leaves_the_previous_checkpoint(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    store = CheckpointStore(tmp_path, "abc")
    store.save(1, _state(1.0))

    def crash(obj: object, f: io.BufferedWriter) -> None:
        f.write(b"partial")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch, "save", crash)
    with pytest.raises(OSError) as info:
        store.save(2, _state(2.0))
    assert info.value.errno == errno.ENOSPC
    assert info.value.filename == str(tmp_path / "step-00000002.pt")  # the file is named
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-00000001.pt",
                                                          "step-00000001.sha256"]
    assert store.latest()["step"] == 1


def test_a_full_disk_is_reported_as_such(small_disk: Callable[[int], Path]) -> None:
    """torch.save to a path reports a full disk as `unexpected pos 447296 vs 447188`; the store
    says ENOSPC with the checkpoint's path, and keeps the checkpoint before it."""
    disk = small_disk(64)
    store = CheckpointStore(disk, "abc")
    store.save(1, {"w": torch.zeros(100)})
    with pytest.raises(OSError) as info:
        store.save(2, {"w": torch.zeros(100_000)})
    assert info.value.errno == errno.ENOSPC
    assert info.value.filename == str(disk / "step-00000002.pt")
    assert sorted(p.name for p in disk.iterdir()) == ["step-00000001.pt", "step-00000001.sha256"]
    assert store.latest()["step"] == 1


def _settings(max_steps: int) -> dict[str, object]:
    return {"model": {"n_embd": 8}, "pretrain": {"lr": 0.1, "max_steps": max_steps}}


def test_each_setting_has_its_folder_with_its_settings(tmp_path: Path) -> None:
    runs = CheckpointRuns(tmp_path)
    store = runs.store(_settings(10), keep=2)
    assert store.fingerprint == settings_fingerprint(_settings(10))
    assert store.directory == tmp_path / store.fingerprint[:16]
    store.save(3, _state(3.0))
    assert json.loads((store.directory / RUN_FILE).read_text()) == _settings(10)
    assert runs.store(_settings(10), keep=2).latest()["step"] == 3
    assert runs.store(_settings(20), keep=2).latest() is None


def test_other_runs_are_kept_and_reported(tmp_path: Path,
                                          caplog: pytest.LogCaptureFixture) -> None:
    runs = CheckpointRuns(tmp_path)
    for steps in (10, 20, 30):
        runs.store(_settings(steps), keep=2).save(steps, _state(steps))
        time.sleep(0.01)  # distinct modification times: 10 is the least recent
    current = runs.store(_settings(40), keep=2)
    with caplog.at_level(logging.WARNING, logger="gpt1.training.checkpoint"):
        runs.set_aside(current, keep_other_runs=None)
    assert "checkpoints of 3 run(s) with other settings are kept" in caplog.text
    assert [run.settings for run in runs.others(current)] == [_settings(s) for s in (10, 20, 30)]
    assert runs.others(current)[0].store.latest()["step"] == 10  # resumable, as `extend` does

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="gpt1.training.checkpoint"):
        runs.set_aside(current, keep_other_runs=1)
    oldest = [runs.store(_settings(s), keep=2).directory for s in (10, 20)]
    for folder in oldest:
        assert f"{folder}: deleting the checkpoints of other settings" in caplog.text
        assert not folder.exists()
    assert [run.settings for run in runs.others(current)] == [_settings(30)]


def test_loose_checkpoints_of_the_old_layout_are_filed(tmp_path: Path,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    CheckpointStore(tmp_path, "f" * 64).save(5, _state(5.0))
    runs = CheckpointRuns(tmp_path)
    with caplog.at_level(logging.WARNING, logger="gpt1.training.checkpoint"):
        runs.set_aside(runs.store(_settings(10), keep=2), keep_other_runs=None)
    assert not list(tmp_path.glob("*.pt"))
    assert CheckpointStore(tmp_path / ("f" * 16), "f" * 64).latest()["step"] == 5
    assert "moved to" in caplog.text


def test_missing_directory_has_no_checkpoint(tmp_path: Path) -> None:
    assert CheckpointStore(tmp_path / "absent", "abc").latest() is None


def test_keep_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="keep must be at least 1"):
        CheckpointStore(tmp_path, "abc", keep=0)


def test_first_signal_is_recorded_and_handlers_restored() -> None:
    before = {signum: signal.getsignal(signum) for signum in StopSignals.SIGNALS}
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        with StopSignals() as stop:
            assert stop.requested is None
            os.kill(os.getpid(), signal.SIGTERM)
            assert stop.requested == signal.SIGTERM
            assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # a second one kills
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
        assert signal.getsignal(signal.SIGINT) == before[signal.SIGINT]
    finally:
        signal.signal(signal.SIGTERM, before[signal.SIGTERM])


def test_an_ignored_signal_stays_ignored() -> None:
    """A run started with nohup (or in the background of a script) ignores SIGINT: keep it so."""
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with StopSignals():
            assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)


def test_stop_requested_names_signal_step_and_file() -> None:
    err = StopRequested(signal.SIGINT, 12, Path("ck/step-00000012.pt"))
    assert str(err) == "SIGINT at step 12: checkpoint ck/step-00000012.pt"


def test_rng_state_round_trip() -> None:
    torch.manual_seed(3)
    saved = rng_state()
    first = torch.rand(4)
    set_rng_state(saved)
    assert torch.equal(torch.rand(4), first)
