"""gpt1.jobs.pretrain, the work of stages `pretrain` and `pretrain_lstm`. (The stage's own part,
tasks/pretrain.py: tests/tasks/test_pretrain.py.)"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import platform
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

import gpt1.jobs.pretrain as job
from gpt1.corpus.tokenizer import train_bpe
from gpt1.errors import InputError
from gpt1.model.lstm import LSTM, LSTMConfig
from gpt1.model.transformer import GPT1, GPT1Config
from gpt1.training.checkpoint import CheckpointRuns, CheckpointStore, StopRequested
from gpt1.training.pretrain_loop import PretrainResult
from tests.tiny_pretrain import MODEL, PRETRAIN, tiny_params
from tests.token_shards import write_token_shards

pytestmark = pytest.mark.usefixtures("one_torch_thread")

LOGGER = "gpt1.jobs.pretrain"
# the knobs that, changed, still resume a run (written out here, not read from the module)
OUTSIDE_FINGERPRINT = ["log_every", "checkpoint_every", "keep_checkpoints", "keep_other_runs",
                       "peak_tflops", "source", "source_dir"]
MANIFEST = '{"vocab_size": 100}\n'


def _numel(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


# -- params -> model config and training knobs -------------------------------------------------

def test_the_transformer_is_the_model_section() -> None:
    expected = GPT1Config(vocab_size=100, n_ctx=16, n_embd=32, n_layer=2, n_head=2,
                          embd_pdrop=0.1, attn_pdrop=0.1, resid_pdrop=0.1)
    assert job.model_config(tiny_params(), 100) == expected
    assert job.trunk_config(tiny_params(), "gpt1", 100) == expected


def test_the_lstm_has_its_units_or_the_most_within_the_transformers_parameters() -> None:
    assert job.lstm_config(tiny_params(lstm_units=24), 100) == LSTMConfig(
        vocab_size=100, n_ctx=16, n_embd=24, embd_pdrop=0.1, resid_pdrop=0.1)
    cfg = job.trunk_config(tiny_params(lstm_units=None), "lstm", 100)
    assert isinstance(cfg, LSTMConfig) and (cfg.n_ctx, cfg.embd_pdrop) == (16, 0.1)
    budget = _numel(GPT1(GPT1Config(vocab_size=100, n_ctx=16, n_embd=32, n_layer=2, n_head=2)))
    wider = LSTMConfig(vocab_size=100, n_ctx=16, n_embd=cfg.n_embd + 1)
    assert _numel(LSTM(cfg)) <= budget < _numel(LSTM(wider))


def test_the_lstm_trains_at_its_own_learning_rate_when_one_is_set() -> None:
    params = tiny_params(lstm_lr=0.002)
    assert job.training_knobs(params, "lstm") == PRETRAIN.model_copy(update={"lr": 0.002})
    assert job.training_knobs(params, "gpt1") == PRETRAIN
    assert job.training_knobs(tiny_params(lstm_lr=None), "lstm") == PRETRAIN


# -- the run's fingerprint ---------------------------------------------------------------------

def test_the_settings_are_the_model_the_knobs_that_shape_training_and_the_shards() -> None:
    params = tiny_params()
    knobs = {k: v for k, v in PRETRAIN.model_dump().items() if k not in OUTSIDE_FINGERPRINT}
    assert PRETRAIN.compile == "auto" and PRETRAIN.device == "cpu"
    knobs["compile"] = False  # what auto is on the CPU: whether the run compiles is what counts
    assert job.run_settings(params, MANIFEST) == {
        "model": {"n_ctx": 16, "n_embd": 32, "n_layer": 2, "n_head": 2, "dropout": 0.1},
        "pretrain": knobs, "shards": hashlib.sha256(MANIFEST.encode()).hexdigest()}
    assert job.run_settings(params, MANIFEST, "lstm") == {
        "model": {"n_ctx": 16, "n_embd": 32, "n_layer": 2, "n_head": 2, "dropout": 0.1},
        "pretrain": {**knobs, "lr": 0.002}, "shards": hashlib.sha256(MANIFEST.encode()).hexdigest(),
        "trunk": {"model_type": "lstm", "n_embd": None, "lr": 0.002}}


def test_the_fingerprint_of_a_run_is_unchanged() -> None:
    """The digests the checkpoints of these settings are filed under (computed before the job
    left tasks/pretrain.py): another digest would start every run afresh instead of resuming."""
    fingerprints = {trunk: CheckpointRuns(Path("x")).store(
        job.run_settings(tiny_params(max_steps=10, snapshots=[0, 5], log_every=5,
                                     checkpoint_every=5, eval_every=5), MANIFEST, trunk),
        keep=2).fingerprint for trunk in ("gpt1", "lstm")}
    assert fingerprints == {
        "gpt1": "31eeba150e119a6b3187c664d9f91802c815cfb9f4e001dcc9e8c471a2c5c3dd",
        "lstm": "6dc21a8855a86c39acb7462ad0cd146acacbf53d6e5a99381c9d431518152cf7"}


def test_knobs_outside_the_fingerprint_leave_it_and_the_others_change_it() -> None:
    same = job.run_settings(tiny_params(), MANIFEST)
    outside = {"log_every": 1, "checkpoint_every": 1, "keep_checkpoints": 5,
               "keep_other_runs": 0, "peak_tflops": 2.0}
    assert job.run_settings(tiny_params(**outside), MANIFEST) == same
    assert job.run_settings(tiny_params(lr=0.004), MANIFEST) != same
    # on the CPU auto is eager: asking for eager is the same run, asking to compile another
    assert job.run_settings(tiny_params(compile=False), MANIFEST) == same
    assert job.run_settings(tiny_params(compile=True), MANIFEST) != same
    assert job.run_settings(tiny_params(), MANIFEST.replace("100", "101")) != same


def _run(runs: CheckpointRuns, steps_done: int, **pretrain: object) -> CheckpointStore:
    store = runs.store({"model": {"n_embd": 8},
                        "pretrain": {"lr": 0.1, "max_steps": 40, "extend": True, **pretrain}},
                       keep=2)
    if steps_done:
        store.save(steps_done, {"w": torch.zeros(1)})
    return store


def test_extend_continues_the_shorter_run_of_the_same_settings_that_got_furthest(
        tmp_path: Path) -> None:
    runs = CheckpointRuns(tmp_path)
    furthest = _run(runs, 20, max_steps=20, extend=False)  # extend is no setting of its own
    _run(runs, 10, max_steps=30)  # shorter, but not as far
    _run(runs, 30, max_steps=30, lr=0.2)  # other settings
    _run(runs, 45, max_steps=50)  # longer
    ours = _run(runs, 0)
    extended = job.run_to_extend(runs, ours)
    assert extended is not None and extended.directory == furthest.directory
    assert job.run_to_extend(CheckpointRuns(tmp_path / "none"), ours) is None


# -- resources, snapshots, the manifest --------------------------------------------------------

def test_resources_are_checked_for_the_checkpoints_snapshots_and_model(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checked: list[tuple[object, ...]] = []
    monkeypatch.setattr(job, "check_disk", lambda *args: checked.append(("disk", *args)))
    monkeypatch.setattr(job, "check_memory", lambda *args: checked.append(("memory", *args)))
    cfg = job.model_config(tiny_params(), 100)
    job.check_resources(tiny_params(keep_checkpoints=3), cfg, tmp_path)
    weights = 4 * _numel(GPT1(cfg))  # fp32
    # 4 checkpoints of weights and two Adam moments; the model and the 3 snapshots reached
    # (of 0, 2, 4, 9 in 4 steps), each twice (DVC caches a copy)
    assert checked == [
        ("memory", cfg, 8, torch.device("cpu"), "model and pretrain.batch_size"),
        ("disk", tmp_path, 4 * 3 * weights + 2 * 4 * weights,
         "pretrain.keep_checkpoints + 1 = 4 checkpoints, 3 snapshots and the model")]
    checked.clear()
    lstm = LSTMConfig(vocab_size=100, n_ctx=16, n_embd=8)
    job.check_resources(tiny_params(), lstm, tmp_path)  # no activation estimate for the LSTM
    assert [c[0] for c in checked] == ["disk"]
    assert checked[0][2] == 3 * 3 * 4 * _numel(LSTM(lstm)) + 2 * 4 * 4 * _numel(LSTM(lstm))


def test_the_snapshots_kept_are_copied_and_one_passed_before_it_was_asked_for_is_named(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = CheckpointStore(tmp_path / "run", "abc")
    for step in (0, 10):
        folder = tmp_path / "run/snapshots" / f"step-{step:08d}"
        folder.mkdir(parents=True)
        (folder / "model.safetensors").write_text(f"weights at {step}")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        job.copy_snapshots(store, [0, 5, 10, 20], 15, tmp_path / "model/snapshots")
    assert sorted(p.name for p in (tmp_path / "model/snapshots").iterdir()) == [
        "step-00000000", "step-00000010"]
    assert (tmp_path / "model/snapshots/step-00000010/model.safetensors").read_text() == \
        "weights at 10"
    assert (f"no snapshot of steps [5] in {tmp_path / 'run'}: they were passed before they "
            "were asked for") in caplog.text  # 20 comes after max_steps: not missing


def test_the_manifest_is_read_whole_and_checked_against_the_tokenizer(tmp_path: Path) -> None:
    text = '{"vocab_size": 100, "splits": {}}\r\n'
    (tmp_path / "manifest.json").write_bytes(text.encode())
    assert job.read_manifest(tmp_path, 100, Path("bpe/tokenizer.json")) == (
        '{"vocab_size": 100, "splits": {}}\n', {"vocab_size": 100, "splits": {}})
    with pytest.raises(InputError, match=(
            rf"^{tmp_path}/manifest.json: vocab_size 100 does not match bpe/tokenizer.json "
            r"\(99\); re-run tokenize$")):
        job.read_manifest(tmp_path, 99, Path("bpe/tokenizer.json"))


def test_a_damaged_manifest_names_the_file_and_the_stage_that_writes_it(tmp_path: Path) -> None:
    (tmp_path / "manifest.json").write_text('{"vocab_size": 10')
    with pytest.raises(InputError, match=(
            rf"^{tmp_path}/manifest.json: damaged, not the JSON stage tokenize writes .*"
            r"run `dvc repro --force tokenize` to write it again$")):
        job.read_manifest(tmp_path, 100, Path("bpe/tokenizer.json"))


# -- the metrics -------------------------------------------------------------------------------

COMPUTE = {"device": "cuda", "dtype": "bfloat16", "compiled": True, "processes": 2,
           "machine": {"gpu": "NVIDIA H200"}}


def test_the_metrics_of_a_run() -> None:
    # two sessions (a resumed run), each first step 0.05 s: the other 8 steps took 0.04 s
    result = PretrainResult(steps=10, train_loss=4.63714, val_loss=4.64286, tokens=1280,
                            seconds=0.14, startup_seconds=0.1, startup_steps=2,
                            mfu=0.0017394, peak_flops=3.5e11, resumed_from=4, compute=COMPUTE)
    assert job.pretrain_metrics("gpt1", 29248, result, 4.65602) == {
        "run": True, "model_type": "gpt1", "steps": 10, "tokens": 1280, "train_loss": 4.6371,
        "val_loss": 4.6429, "val_perplexity": round(math.exp(4.64286), 2),
        "unigram_val_loss": 4.656, "parameters": 29248, "seconds": 0.1, "startup_seconds": 0.1,
        "tokens_per_second": round(8 * 128 / 0.04, 1), "mfu": 0.0017, "peak_tflops": 0.35,
        "compute": COMPUTE}


def test_a_loss_within_a_tenth_of_a_nat_of_token_frequencies_has_learned_little() -> None:
    assert job.learned_little(4.6429, 4.6560)
    assert job.learned_little(4.57, 4.66)
    assert not job.learned_little(4.55, 4.66)
    assert job.unreached_snapshots(PRETRAIN) == [9]


# -- the job -----------------------------------------------------------------------------------

def _inputs(root: Path) -> None:
    """A tokenizer in `root/bpe` and random token shards in `root/shards`, as tokenize writes."""
    write_token_shards(root / "bpe", root / "shards", {"train": 1500, "val": 400}, 1000)


def _outputs(root: Path) -> job.PretrainOutputs:
    return job.PretrainOutputs(root / "model", root / "checkpoints", root / "live", "snapshots")


class _Curves:
    """A `MetricsLog` that keeps what it is given, by the folder it was opened for."""

    def __init__(self) -> None:
        self.seen: dict[Path, list[tuple[int, dict[str, float]]]] = {}

    @contextmanager
    def __call__(self, folder: Path) -> Iterator[job.MetricsCallback]:
        self.seen[folder] = []
        yield lambda step, values: self.seen[folder].append((step, dict(values)))


@pytest.mark.parametrize("trunk", ["gpt1", "lstm"])
def test_the_job_pretrains_writes_the_model_and_resumes_under_other_log_knobs(
        tmp_path: Path, trunk: str, caplog: pytest.LogCaptureFixture) -> None:
    _inputs(tmp_path)
    outputs, curves = _outputs(tmp_path), _Curves()
    with caplog.at_level(logging.INFO):
        metrics = job.pretrain_job(tiny_params(), trunk, outputs, tmp_path / "shards",
                                   tmp_path / "bpe", curves)
    assert metrics is not None
    assert (metrics["run"], metrics["model_type"], metrics["steps"], metrics["tokens"]) == (
        True, trunk, 4, 4 * 8 * 16)
    assert list(metrics) == ["run", "model_type", "steps", "tokens", "train_loss", "val_loss",
                             "val_perplexity", "unigram_val_loss", "parameters", "seconds",
                             "startup_seconds", "tokens_per_second", "mfu", "peak_tflops",
                             "compute"]
    assert metrics["peak_tflops"] == 1.0  # pretrain.peak_tflops, the MFU's denominator
    # where it computed: PRETRAIN's device and precision, eager on the CPU, on this machine
    machine = metrics["compute"].pop("machine")
    assert metrics["compute"] == {"device": "cpu", "dtype": "float32", "compiled": False,
                                  "processes": 1}
    assert (machine["torch"], machine["threads"], machine["python"]) == (
        torch.__version__, torch.get_num_threads(), platform.python_version())
    assert sorted(p.name for p in outputs.model.iterdir()) == [
        "config.json", "model.safetensors", "snapshots", "tokenizer.json"]
    assert (outputs.model / "tokenizer.json").read_bytes() == \
        (tmp_path / "bpe/tokenizer.json").read_bytes()
    assert sorted(p.name for p in (outputs.model / "snapshots").iterdir()) == [
        "step-00000000", "step-00000002", "step-00000004"]
    assert [step for step, values in curves.seen[outputs.live] if "val/loss" in values] == [2, 4]
    assert "pretrain.snapshots: steps [9] come after max_steps (4) and are not kept" in caplog.text
    assert f"after 4 steps; token frequencies alone: {metrics['unigram_val_loss']:.4f}" in \
        caplog.text

    # log_every and checkpoint_every are outside the fingerprint: the same run, resumed
    caplog.clear()
    with caplog.at_level(logging.INFO):
        again = job.pretrain_job(tiny_params(log_every=1, checkpoint_every=1), trunk, outputs,
                                 tmp_path / "shards", tmp_path / "bpe", _Curves())
    assert "resumed from the checkpoint of step 4" in caplog.text
    assert again is not None and again["val_loss"] == metrics["val_loss"]
    assert len(list(outputs.checkpoints.iterdir())) == 1


def test_the_job_checks_the_shards_against_the_tokenizer(tmp_path: Path) -> None:
    _inputs(tmp_path)
    manifest = json.loads((tmp_path / "shards/manifest.json").read_text())
    (tmp_path / "shards/manifest.json").write_text(json.dumps({**manifest, "vocab_size": 7}))
    with pytest.raises(InputError, match="vocab_size 7 does not match"):
        job.pretrain_job(tiny_params(), "gpt1", _outputs(tmp_path), tmp_path / "shards",
                         tmp_path / "bpe", _Curves())
    assert not (tmp_path / "model").exists() and not (tmp_path / "checkpoints").exists()


def test_a_stopped_run_says_how_to_resume_and_raises(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    _inputs(tmp_path)
    stop = StopRequested(signal.SIGTERM, 3, Path("ckpt/step-00000003.pt"))

    def stopped(*args: object) -> PretrainResult:
        raise stop

    monkeypatch.setattr(job, "pretrain", stopped)
    with caplog.at_level(logging.WARNING, logger=LOGGER), pytest.raises(StopRequested):
        job.pretrain_job(tiny_params(), "gpt1", _outputs(tmp_path), tmp_path / "shards",
                         tmp_path / "bpe", _Curves())
    assert ("pretraining stopped: SIGTERM at step 3: checkpoint ckpt/step-00000003.pt; run the "
            "stage again to resume from it") in caplog.text
    assert not (tmp_path / "model").exists()


def test_a_released_model_is_imported_with_its_tokenizer(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(0)
    model = GPT1(job.model_config(tiny_params(), 100))
    tokenizer = train_bpe(["a b c ab abc"], 40, 1)
    asked: list[tuple[object, ...]] = []

    def released(*args: object) -> SimpleNamespace:
        asked.append(args)
        return SimpleNamespace(model=model, tokenizer=tokenizer)

    monkeypatch.setattr(job, "import_pretrained", released)
    params = tiny_params(source="openai", source_dir="release")
    outputs = _outputs(tmp_path)
    metrics = job.pretrain_job(params, "gpt1", outputs, tmp_path / "shards", tmp_path / "bpe",
                               _Curves())
    assert asked == [("openai", Path("release"), MODEL, 1234)]
    assert metrics == {"run": True, "source": "openai", "source_dir": "release",
                       "model_type": "gpt1", "parameters": _numel(model), "vocab_size": 100,
                       "n_ctx": 16, "n_embd": 32, "n_layer": 2, "n_head": 2,
                       "seconds": metrics["seconds"]}
    assert sorted(p.name for p in outputs.model.iterdir()) == [
        "config.json", "model.safetensors", "tokenizer.json"]
    # the folders only training fills are there, empty, as dvc.yaml's outputs must be
    assert list(outputs.live.iterdir()) == [] and list(outputs.checkpoints.iterdir()) == []
