"""gpt1.checkpoint: atomic, code-free checkpoints; the newest good one of this run wins."""

from __future__ import annotations

import logging
import os
import pickle
import signal
from pathlib import Path

import pytest
import torch

from gpt1.checkpoint import CheckpointStore, StopRequested, StopSignals, rng_state, set_rng_state


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
    assert [p.name for p in tmp_path.iterdir()] == ["step-00000007.pt"]  # no temp files left


def test_keeps_only_the_newest(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path, "abc", keep=2)
    for step in (10, 20, 30, 100):
        store.save(step, _state(step))
    assert [p.name for p in store.paths()] == ["step-00000030.pt", "step-00000100.pt"]
    assert store.latest()["step"] == 100  # numeric order, not the order of the file names' digits


def test_unreadable_newest_falls_back_to_the_previous(tmp_path: Path,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    store = CheckpointStore(tmp_path, "abc")
    store.save(1, _state(1.0))
    newest = store.save(2, _state(2.0))
    newest.write_bytes(newest.read_bytes()[:100])  # cut short, as by a copy that died
    with caplog.at_level(logging.WARNING, logger="gpt1.checkpoint"):
        state = store.latest()
    assert state is not None and state["step"] == 1
    assert "step-00000002.pt: unreadable checkpoint" in caplog.text


class _Exploit:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, ("touch pwned",))


@pytest.mark.filterwarnings("ignore:Detected pickle protocol:UserWarning")
def test_loading_executes_no_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = CheckpointStore(tmp_path / "ckpt", "abc")
    store.save(1, _state(1.0))
    (tmp_path / "ckpt" / "step-00000002.pt").write_bytes(pickle.dumps(_Exploit()))
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

    def crash(obj: object, f: object) -> None:
        Path(f).write_bytes(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", crash)
    with pytest.raises(OSError, match="disk full"):
        store.save(2, _state(2.0))
    assert [p.name for p in tmp_path.iterdir()] == ["step-00000001.pt"]
    assert store.latest()["step"] == 1


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
