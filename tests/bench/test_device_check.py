"""bench.device_check: the one-call GPU check runs every part at toy sizes on the CPU, on the
shards of a real tokenize run, and needs none of DVC, Prefect or spaCy."""

from __future__ import annotations

import ast
import importlib.metadata
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import torch
from packaging.requirements import Requirement

from bench import device_check, device_wheels
from gpt1.training.device import resolve_dtype
from tests.token_shards import write_token_shards

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.e2e
def test_tiny_check_runs_every_part_from_a_bundle(reproduced_once, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    repo, bundle = reproduced_once.repo, tmp_path / "bundle"
    device_check.main(["--tiny", "--prepare", str(bundle), "--shards", str(repo / "data/shards"),
                       "--bpe", str(repo / "artifacts/bpe")])
    written = device_check.main(["--tiny", "--device", "cpu", "--repeats", "1", "--profile",
                                 "--bundle", str(bundle), "--out", str(tmp_path)])
    result = json.loads(written.read_text())
    table, profiled = result["tables"]
    rows = table["rows"]
    parts = [row["part"] for row in rows]
    assert parts[-3:] == ["fine-tuning", "generation", "generation"]
    assert set(parts[:-4]) == {"train step"} and parts[-4] == "pretraining"
    # on the CPU `--compile auto` times the eager sides (bench.train_step's tests compile), in
    # bf16 where this CPU computes it natively
    dtype = str(resolve_dtype("auto", torch.device("cpu"))).removeprefix("torch.")
    sides = ["ours", "transformers float32", *([f"transformers {dtype}"] * (dtype != "float32"))]
    assert [row["run"] for row in rows if row["part"] == "train step"] == [
        f"{side} ({'float32' if 'float32' in side else dtype})" for side in sides]
    # --profile: the train step's profile of each side, and its costliest ops
    assert profiled["rows"][-1]["category"] == "step"
    assert all(profiled["rows"][-1][f"{side} ms"] > 0 for side in sides)
    assert sorted(result["settings"]["train_step"]["profile_top_ops"]) == sorted(sides)
    for row in rows:
        assert math.isfinite(row["rate"]) and row["rate"] > 0, row
        assert row["peak GiB"] > 0 and row["seconds"] > 0, row
    figures = result["settings"]
    pretraining = figures["pretraining"]
    assert pretraining["val_loss"] < pretraining["val_loss_before"]
    assert 0 < pretraining["startup_seconds"] < pretraining["seconds"]
    finetuning = figures["finetuning"]
    assert finetuning["train_examples"] == device_check.TINY_EXAMPLES
    assert 0 <= finetuning["accuracy"] <= 100 and 0 < finetuning["majority_accuracy"] <= 100
    assert result["machine"] and result["commit"]

    # cut short (a lease's time limit, a failing part): the JSON keeps the parts that finished
    def cut_short(*args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(device_check, "check_generation", cut_short)
    cut = tmp_path / "cut"
    cut.mkdir()
    with pytest.raises(KeyboardInterrupt):
        device_check.main(["--tiny", "--device", "cpu", "--bundle", str(bundle), "--out",
                           str(cut), "--parts", "pretraining,finetuning,generation"])
    kept = json.loads((cut / "device_check.json").read_text())
    assert [row["part"] for row in kept["tables"][0]["rows"]] == ["pretraining", "fine-tuning"]
    assert set(kept["settings"]) >= {"pretraining", "finetuning"}


def test_a_bundle_keeps_the_first_shards_up_to_max_tokens(tmp_path: Path) -> None:
    vocab = write_token_shards(tmp_path / "bpe", tmp_path / "shards",
                               {"train": 2500, "val": 700}, 1000)
    bundle = tmp_path / "bundle"
    device_check.main(["--tiny", "--prepare", str(bundle), "--shards", str(tmp_path / "shards"),
                       "--bpe", str(tmp_path / "bpe"), "--max-tokens", "1500"])
    manifest = json.loads((bundle / "shards" / "manifest.json").read_text())
    kept = manifest["splits"]
    # whole shards, in order, until 1,500 tokens are in: two of the three
    assert [(e["file"], e["tokens"]) for e in kept["train"]["shards"]] == [
        ("00000.arrow", 1000), ("00001.arrow", 1000)]
    assert kept["train"]["tokens"] == 2000 and kept["val"]["tokens"] == 700
    assert sorted(p.name for p in (bundle / "shards" / "train").iterdir()) == [
        "00000.arrow", "00001.arrow"]
    tokenizer, train, val = device_check.load_shards(bundle)  # verified against the manifest
    assert (tokenizer.vocab_size, [len(s) for s in train], [len(s) for s in val]) == (
        vocab, [1000, 1000], [700])
    sst2 = pq.read_table(bundle / "sst2" / "train.parquet")
    assert sst2.num_rows == 2000 and sst2.column_names == ["sequences", "target"]


def _imported_distributions() -> set[str]:
    """The distributions that our modules loaded by `import bench.device_check` (in a fresh
    process) import as they load; what those import in turn is theirs to require. Imports
    inside functions are left out: spaCy's, for one, runs only where the bundle is prepared."""
    listed = subprocess.run(
        [sys.executable, "-c", "import sys, bench.device_check; print(sorted(sys.modules))"],
        cwd=REPO, capture_output=True, text=True, check=True).stdout
    ours = [name for name in ast.literal_eval(listed) if name.split(".")[0] in ("bench", "gpt1")]
    imported: set[str] = set()
    for name in ours:
        path = REPO / (name.replace(".", "/") + ".py")
        if not path.exists():
            path = REPO / name.replace(".", "/") / "__init__.py"
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
    owners = importlib.metadata.packages_distributions()
    return {canonical(dist) for module in imported for dist in owners.get(module, [])}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirements(roots: list[str]) -> set[str]:
    """`roots` and every distribution they require, transitively (extras left out)."""
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = canonical(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for line in requires:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return seen


def test_its_wheels_are_all_it_needs_beyond_torch_and_transformers() -> None:
    imported = _imported_distributions()
    assert not imported & {"dvc", "prefect", "spacy"}
    wheels = {canonical(name) for name in device_wheels.WHEELS}
    there = _requirements(["torch", "transformers", *device_wheels.ALREADY_THERE])
    assert imported - {"gpt1"} <= there | wheels, "carry these too"
    assert wheels <= _requirements(sorted(imported & wheels)), "a wheel it never needs"


@pytest.mark.parametrize("parts", ["finetuning,generation", "train-step,warmup"])
def test_parts_that_cannot_run_are_refused(parts: str, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """Fine-tuning without the pretraining it starts from, or a part that does not exist: a
    usage error (exit 2) before anything runs."""
    with pytest.raises(SystemExit) as stop:
        device_check.main(["--tiny", "--bundle", str(tmp_path), "--parts", parts])
    assert stop.value.code == 2
    assert "--parts:" in capsys.readouterr().err


def test_generation_alone_runs_without_a_bundle(tmp_path: Path) -> None:
    """Generation (and the train step) read no bundle; repetitions are 3 unless asked."""
    written = device_check.main(["--tiny", "--device", "cpu", "--parts", "generation",
                                 "--out", str(tmp_path)])
    result = json.loads(written.read_text())
    (table,) = result["tables"]
    assert [row["part"] for row in table["rows"]] == ["generation", "generation"]
    settings = result["settings"]
    assert settings["repeats"] == 3 and settings["bundle"] is None
    assert all(len(rates) == 3 for rates in
               settings["generation"]["tokens_per_second"].values())
    assert any("after an untimed run of each side" in note for note in table["notes"])


def test_pretraining_without_a_bundle_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        device_check.main(["--tiny", "--parts", "train-step,pretraining"])
    assert stop.value.code == 2
    assert "--bundle" in capsys.readouterr().err
