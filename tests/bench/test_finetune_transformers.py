"""`bench.finetune_transformers`: its transformers reference computes our loss and our outputs
from the same weights and inputs, and the benchmark runs end to end at --tiny sizes on the
bundled data. No timing is asserted: the figures depend on the machine."""

from __future__ import annotations

import json
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
import torch

from bench import finetune_transformers as ft
from bench.finetune import ROOT, Data, Sizes
from bench.profiling import CATEGORIES, summary
from bench.train_step import StepClock
from gpt1.config import FinetuneTrainParams, load_params
from gpt1.model.heads import TaskModel
from gpt1.training.device import Placement
from gpt1.training.finetune_loop import _task_loss, pad_batch, predict

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SIZES = Sizes(train_examples=0, dev_examples=0, vocab_size=50, n_ctx=24, n_embd=16, n_layer=2,
              n_head=2)
PAD = 0
CPU = Placement(torch.device("cpu"), torch.float32)


def _model_and_examples(task_name: str, n: int = 12) -> tuple[TaskModel,
                                                               list[list[list[int]]],
                                                               np.ndarray, float]:
    """A random model of `task_name`'s head, and `n` random examples of varied lengths with as
    many sequences as its family reads (two choices for Story Cloze)."""
    params = load_params(ROOT / "params.yaml")
    task = params.tasks[task_name]
    cfg = params.finetune.for_task(task, 7)
    model = ft.initial_model(task, cfg, SIZES, SIZES.vocab_size, dropout=0.1)
    per_example = 2 if task.family == "multiple_choice" else 1
    rng = np.random.default_rng(0)
    examples = [[rng.integers(1, SIZES.vocab_size, rng.integers(3, SIZES.n_ctx + 1)).tolist()
                 for _ in range(per_example)] for _ in range(n)]
    targets = rng.integers(0, per_example if per_example > 1 else 2, n)
    return model, examples, targets, cfg.lm_coef


@pytest.mark.parametrize("task_name", [ft.CLASSIFICATION, ft.CHOICE])
def test_reference_loss_is_ours(task_name: str) -> None:
    """Same weights, same batch, no dropout: transformers' mc_loss + lm_coef x LM loss equals
    our task loss + lm_coef x LM loss over the text."""
    model, examples, targets, lm_coef = _model_and_examples(task_name)
    reference = ft.reference_model(model).eval()
    model.eval()
    idx = np.arange(len(examples))
    ids, lengths = pad_batch([seq for e in examples for seq in e], PAD)
    with torch.no_grad():
        ours = _task_loss(model, ids, lengths, len(examples[0]), torch.as_tensor(targets),
                          lm_coef)
        theirs = ft.reference_loss(reference, ft.collate(examples, idx, PAD, CPU.device),
                                   torch.as_tensor(targets), lm_coef)
    assert lm_coef > 0
    assert theirs.item() == pytest.approx(ours.item(), abs=1e-5)


@pytest.mark.parametrize("task_name", [ft.CLASSIFICATION, ft.CHOICE])
def test_reference_predicts_as_ours(task_name: str) -> None:
    """Our length-sorted `predict` and the reference's dataset-order batches give the same
    outputs, and so the same predictions."""
    model, examples, _, _ = _model_and_examples(task_name, n=20)
    reference = ft.reference_model(model)
    ours = predict(model, examples, PAD, batch_size=8)
    theirs = ft.reference_predict(reference, examples, PAD, 8, CPU)
    assert theirs.shape == ours.shape == (20, 2)
    np.testing.assert_allclose(theirs, ours, atol=1e-5)
    assert np.array_equal(theirs.argmax(axis=1), ours.argmax(axis=1))


def test_finetune_transformers_tiny_from_a_bundle(tmp_path: Path) -> None:
    """--prepare writes the tasks as the run would encode them (what a GPU machine without spaCy
    runs from), and the run from that bundle ends in both tables."""
    bundle = tmp_path / "bundle"
    assert ft.main(["--tiny", "--prepare", str(bundle)]) == bundle
    data, task_sizes = ft.load_bundle(bundle)
    params = load_params(ROOT / "params.yaml")
    tiny = ft.sizes(params, tiny=True, train_examples=0)
    assert task_sizes == {ft.CLASSIFICATION: tiny, ft.CHOICE: tiny}
    expected = {ft.CLASSIFICATION: ft.load_data(params, ft.SAMPLE, tiny),
                ft.CHOICE: ft.load_choice_data(params, ft.SAMPLE, tiny)}
    for name, d in data.items():
        assert (d.train, d.dev) == (expected[name].train, expected[name].dev)
        assert np.array_equal(d.train_targets, expected[name].train_targets)
        assert np.array_equal(d.dev_targets, expected[name].dev_targets)
        assert d.tok.backend.get_vocab() == expected[name].tok.backend.get_vocab()

    path = ft.main(["--bundle", str(bundle), "--device", "cpu", "--precision", "fp32",
                    "--repeats", "3", "--seeds", "1", "--profile", "--profile-steps", "2",
                    "--trace", str(tmp_path / "traces"), "--out", str(tmp_path)])
    result = json.loads(path.read_text())
    assert result["settings"]["bundle"] == str(bundle)
    assert path.name == "finetune_transformers.json"
    assert result["benchmark"] == "finetune_transformers"
    settings = result["settings"]
    assert (settings["device"], settings["precision"], settings["dtype"]) == (
        "cpu", "fp32", "float32")
    rates, quality, *profiles = result["tables"]
    titles = ["SST-2", "Story Cloze"]
    assert [(r["task"], r["phase"]) for r in rates["rows"]] == [
        (t, phase) for t in titles for phase in ("train", "eval")]
    for row in rates["rows"]:
        assert row["ours"] > 0 and row["transformers"] > 0
        assert row["ratio"] == pytest.approx(row["ours"] / row["transformers"])
        firsts = [row.get(f"{side} first step s") for side in ("ours", "transformers")]
        if row["phase"] == "train":
            assert all(first > 0 for first in firsts)
        else:
            assert firsts == [None, None]
    assert [(r["task"], r["side"]) for r in quality["rows"]] == [
        (t, side) for t in titles for side in ("ours", "transformers")]
    for row in quality["rows"]:
        assert 0 <= row["mean"] <= 100 and row["seeds"] == 3 and row["std"] is not None
    assert sum("noise" in note for note in quality["notes"]) == 2
    assert any("randomly initialised" in note for note in quality["notes"])

    # --profile: where each side's training step and eval batch go, per task, after the timed
    # tables; --trace: each recording's Chrome trace
    assert [t["name"] for t in profiles] == [
        f"profile: milliseconds per {what}, {t}" for t in titles
        for what in ("training step", "eval batch")]
    for (train, scoring), name in zip(zip(profiles[::2], profiles[1::2], strict=True),
                                      (ft.CLASSIFICATION, ft.CHOICE), strict=True):
        rows = {row["category"]: row for row in train["rows"]}
        eval_rows = {row["category"]: row for row in scoring["rows"]}
        assert list(rows) == list(eval_rows) == [*CATEGORIES, "step"]
        for side in ft.SIDES:
            assert rows["matmul"][f"{side} ms"] > 0 and rows["optimizer"][f"{side} ms"] > 0
            assert sum(rows[c][f"{side} %"] for c in CATEGORIES) == pytest.approx(100)
            assert sum(settings["profile_ms_per_step"][name][side].values()) == pytest.approx(
                rows["step"][f"{side} ms"])
            assert "aten::addmm" in settings["profile_top_ops"][name][side]
            # scoring trains nothing
            assert eval_rows["matmul"][f"{side} ms"] > 0 == eval_rows["optimizer"][f"{side} ms"]
            assert "aten::addmm" in settings["profile_eval_top_ops"][name][side]
            for phase in ("train", "eval"):
                trace = json.loads((tmp_path / "traces" / name / f"{side}-{phase}.json")
                                   .read_text())
                assert any(e.get("name") == "aten::addmm" for e in trace["traceEvents"])


def test_device_and_precision_reach_both_sides(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """--device and --precision over params.yaml's: ours gets them in its fine-tuning knobs, the
    reference in its placement, and the settings record them."""
    seen = []

    def run(initial: TaskModel, data: Data, cfg: FinetuneTrainParams,
            place: Placement) -> ft.Run:
        seen.append((cfg.device, cfg.precision, place))
        return ft.Run(1.0, 0.5, 1.0, np.zeros((len(data.dev), 2)))

    monkeypatch.setattr(ft, "run_ours", run)
    monkeypatch.setattr(ft, "run_reference", run)
    path = ft.main(["--tiny", "--device", "cpu", "--precision", "bf16", "--repeats", "3",
                    "--seeds", "1", "--out", str(tmp_path)])
    settings = json.loads(path.read_text())["settings"]
    # per task, each side's warm-up and 3 rounds
    assert seen == [("cpu", "bf16", Placement(torch.device("cpu"), torch.bfloat16))] * 16
    assert (settings["device"], settings["precision"], settings["dtype"]) == (
        "cpu", "bf16", "bfloat16")


def test_the_profiled_window_is_the_optimiser_steps_after_the_first() -> None:
    model = torch.nn.Linear(3, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    seen: list[int | str] = []

    class Recording(StepClock):
        def __call__(self, step: int, values: dict[str, float]) -> None:
            seen.append(step)
            super().__call__(step, values)

    class Profiler:
        def start(self) -> None:
            seen.append("start")

        def stop(self) -> None:
            seen.append("stop")

    clock = Recording(1, 3, Profiler())
    with ft.clocked_steps(clock, torch.device("cpu")):
        for _ in range(5):
            model(torch.ones(1, 3)).sum().backward()
            optimizer.step()
    optimizer.step()  # after the window's context: not counted
    assert seen == [1, "start", 2, 3, 4, "stop", 5]  # steps 2 to 4 recorded
    assert clock.seconds > 0


def test_the_train_rate_leaves_out_the_first_step() -> None:
    # 100 examples in 5 steps, 10 s: the first 6 s, then 4 steps of 20 examples in 4 s
    run = ft.Run(train_seconds=10.0, first_step_seconds=6.0, eval_seconds=1.0,
                 outputs=np.zeros((1, 2)))
    assert run.train_rate(100, 5) == pytest.approx(20.0)
    assert ft.Run(2.0, 2.0, 1.0, np.zeros((1, 2))).train_rate(32, 1) == 16.0  # one step: all


def test_compile_adds_ours_compiled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--compile times a third side: ours with finetune.train.compile true, beside both;
    --compile-mode passes torch.compile its mode there."""
    compiled = []

    def ours(initial: TaskModel, data: Data, cfg: FinetuneTrainParams,
             place: Placement) -> ft.Run:
        compiled.append((cfg.compile, getattr(torch.compile, "keywords", {}).get("mode")))
        return ft.Run(2.0 if cfg.compile else 1.0, 0.5, 1.0, np.zeros((len(data.dev), 2)))

    monkeypatch.setattr(ft, "run_ours", ours)
    monkeypatch.setattr(ft, "run_reference", lambda initial, data, cfg, place: ft.Run(
        1.0, 0.5, 1.0, np.zeros((len(data.dev), 2))))
    path = ft.main(["--tiny", "--compile", "--repeats", "3", "--seeds", "1",
                    "--out", str(tmp_path)])
    # per task, ours and ours compiled as warm-ups, then in rounds that start with ours,
    # transformers, ours compiled
    eager, comp = (False, None), (True, None)
    assert compiled == [eager, comp, eager, comp, comp, eager, comp, eager] * 2
    rates, quality = json.loads(path.read_text())["tables"]
    train = next(r for r in rates["rows"] if r["phase"] == "train")
    assert train["ours compiled"] < train["ours"] == train["transformers"]
    assert train["compiled ratio"] == pytest.approx(train["ours compiled"] / train["transformers"])
    assert train["ours compiled first step s"] == 0.5
    assert [r["side"] for r in quality["rows"]][:3] == ["ours", "transformers", "ours compiled"]

    compiled.clear()
    ft.main(["--tiny", "--compile-mode", "reduce-overhead", "--repeats", "3", "--seeds", "1",
             "--out", str(tmp_path)])
    assert set(compiled) == {(False, None), (True, "reduce-overhead")} and len(compiled) == 16
    assert not hasattr(torch.compile, "keywords")  # unpatched after the run


def test_fewer_than_three_rounds_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        ft.main(["--tiny", "--repeats", "2"])
    assert stop.value.code == 2
    assert "--repeats 2: at least 3 alternating rounds" in capsys.readouterr().err


def test_each_side_is_warmed_up_before_rounds_that_rotate(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each side first runs once untimed on the same data and from round 0's seed; then the
    rounds, each from its own seed, the side that starts rotating. The warm-up's figures are in
    no median: only its first step, as the side's cold start."""
    calls: list[tuple[str, int, int]] = []

    def runner(side: str) -> object:
        def run(initial: TaskModel, data: Data, cfg: FinetuneTrainParams,
                place: Placement) -> ft.Run:
            warm = (side, id(data)) not in {(c[0], c[2]) for c in calls}  # its task's first
            calls.append((side, cfg.seed, id(data)))
            # the warm-up is slow (100 s, a 10 s first step), every round 1 s (0.5 s)
            return ft.Run(100.0 if warm else 1.0, 10.0 if warm else 0.5, 1.0,
                          np.zeros((len(data.dev), 2)))
        return run

    monkeypatch.setattr(ft, "run_ours", runner("ours"))
    monkeypatch.setattr(ft, "run_reference", runner("transformers"))
    path = ft.main(["--tiny", "--repeats", "3", "--seeds", "1", "--out", str(tmp_path)])
    result = json.loads(path.read_text())
    seed = load_params(ROOT / "params.yaml").finetune.seeds[0]
    per_task = [("ours", seed), ("transformers", seed),  # the warm-ups
                ("ours", seed), ("transformers", seed),
                ("transformers", seed + 1), ("ours", seed + 1),
                ("ours", seed + 2), ("transformers", seed + 2)]
    assert [call[:2] for call in calls] == per_task * 2
    settings = result["settings"]
    assert settings["warmup"] is True
    assert settings["round_order"] == [["ours", "transformers"], ["transformers", "ours"],
                                       ["ours", "transformers"]]
    assert settings["warmup_first_step_seconds"] == {
        task: {"ours": 10.0, "transformers": 10.0} for task in (ft.CLASSIFICATION, ft.CHOICE)}
    rates = result["tables"][0]
    for row in rates["rows"]:
        assert row["ratio"] == 1.0
        if row["phase"] == "train":
            assert row["ours first step s"] == row["transformers first step s"] == 0.5
    assert any("untimed run of each side" in note for note in rates["notes"])


@pytest.mark.parametrize(("given", "expected"), [("1", 1), ("auto", "auto"), ("8", 8)])
def test_pad_to_multiple_reaches_ours(given: str, expected: object, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """--pad-to-multiple overrides finetune.train.pad_to_multiple in the knobs both sides get
    (the reference pads each batch to its longest whatever it says), and the JSON says it."""
    seen = []

    def run(initial: TaskModel, data: Data, cfg: FinetuneTrainParams,
            place: Placement) -> ft.Run:
        seen.append(cfg.pad_to_multiple)
        return ft.Run(1.0, 0.5, 1.0, np.zeros((len(data.dev), 2)))

    monkeypatch.setattr(ft, "run_ours", run)
    monkeypatch.setattr(ft, "run_reference", run)
    path = ft.main(["--tiny", "--device", "cpu", "--pad-to-multiple", given, "--repeats", "3",
                    "--seeds", "1", "--out", str(tmp_path)])
    settings = json.loads(path.read_text())["settings"]
    assert set(seen) == {expected}
    assert settings["pad_to_multiple"] == expected
    assert settings["width_multiple"] == (1 if expected == "auto" else expected)  # the CPU's


@pytest.mark.parametrize("given", ["0", "-4", "wide"])
def test_a_pad_multiple_below_one_is_refused(given: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        ft.main(["--tiny", "--pad-to-multiple", given])
    assert stop.value.code == 2
    assert "--pad-to-multiple" in capsys.readouterr().err


def test_profile_only_profiles_without_timing(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """--profile-only: the profiles (one step each here), and no timed rounds."""
    def timed(*args: object) -> None:
        raise AssertionError("timed rounds ran")

    monkeypatch.setattr(ft, "measure", timed)
    path = ft.main(["--tiny", "--device", "cpu", "--profile-only", "--profile-steps", "1",
                    "--out", str(tmp_path)])
    result = json.loads(path.read_text())
    assert [t["name"].split(",")[0] for t in result["tables"]] == [
        "profile: milliseconds per training step", "profile: milliseconds per eval batch"] * 2
    settings = result["settings"]
    assert settings["profile_only"] and not settings["warmup"] and settings["round_order"] == []
    assert settings["profile_steps"] == 1
    # what the lease prints of it: each side's step and eval batch, its costliest ops cut short
    shown = summary(settings, rows=2)
    for task in (ft.CLASSIFICATION, ft.CHOICE):
        for side in ft.SIDES:
            for what in ("training step", "eval batch"):
                assert f"== {task}, {side}: {what} " in shown
    assert all(len(part.splitlines()) == 1 + 3 + 2 + 2 for part in shown.split("\n\n"))


def test_ours_scores_at_the_widths_it_trains_at(monkeypatch: pytest.MonkeyPatch) -> None:
    """run_ours hands its knobs' pad_to_multiple to `predict` as well as to `finetune`."""
    model, examples, targets, _ = _model_and_examples(ft.CLASSIFICATION)
    data = Data(examples, targets, examples, targets, tok=mock.Mock(pad_id=PAD))
    cfg = load_params(ROOT / "params.yaml").finetune.train.model_copy(
        update={"seed": 7, "pad_to_multiple": 8})
    seen = []

    def finetune(model: TaskModel, x: object, y: object, pad_id: int,
                 knobs: FinetuneTrainParams) -> object:
        seen.append(knobs.pad_to_multiple)
        return mock.Mock(seconds=1.0, startup_seconds=0.5)

    def predict(*args: object) -> np.ndarray:
        seen.append(args[-1])
        return np.zeros((len(examples), 2))

    monkeypatch.setattr(ft, "finetune", finetune)
    monkeypatch.setattr(ft, "predict", predict)
    ft.run_ours(model, data, cfg, CPU)
    assert seen == [8, 8]
