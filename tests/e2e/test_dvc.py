"""`dvc repro` end to end on the tiny preset against the real data in ../shared/data."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest
from dvc.repo import Repo

from gpt1.config import load_params
from gpt1.corpus.shards import sha256_file
from tests.conftest import HELD_OUT_BOOK, REPO, Reproduced, dvc, edit_params, run

pytestmark = pytest.mark.e2e


def ran_stages(output: str) -> list[str]:
    return re.findall(r"Running stage '([^']+)'", output)


def declared_outputs(repo: Path) -> list[Path]:
    with Repo(str(repo)) as dvc_repo:
        return [Path(out.fs_path) for stage in dvc_repo.index.stages for out in stage.outs]


def declared_stages(repo: Path) -> list[str]:
    """Every stage address DVC declares from the checkout's dvc.yaml (and its dag.yaml)."""
    with Repo(str(repo)) as dvc_repo:
        return [stage.name for stage in dvc_repo.index.stages]


# What the shared tiny pipeline (`make_tiny_repo`: `finetune.tasks: all` on ../shared/data)
# is, stage by stage, in the order `dvc repro` runs them: a fine-tune for each task with data,
# no predict@ (no task names files.predict), Table 5's cells, transfers and zero-shot scores
# for the analysed tasks that are fine-tuned; nothing for QNLI and RACE, whose data is absent
E2E_STAGES = [
    "code", "ingest", "clean", "bpe", "tokenize", "pretrain", "pretrain_control@lstm",
    "finetune@cola", "finetune@sst2", "finetune@rte", "finetune@mrpc", "finetune@stsb",
    "finetune@story_cloze", "lm_eval",
    "ablation@full-sst2", "ablation@full-story_cloze",
    "ablation@no_pretrain-sst2", "ablation@no_pretrain-story_cloze",
    "ablation@no_aux-sst2", "ablation@no_aux-story_cloze",
    "ablation@lstm-sst2", "ablation@lstm-story_cloze",
    "transfer@story_cloze", "transfer@rte",
    "zero_shot@sst2", "zero_shot@cola", "zero_shot@story_cloze", "report"]
# the stages params name that are none, each with why not (gpt1.dag's `not_run`)
E2E_NOT_RUN = {
    "finetune@qnli": "data not found at {data}/glue/QNLI/train.tsv",
    "finetune@race": "data not found at {data}/multiple_choice/RACE/train/middle (and 5 more)",
    **{f"ablation@{variant}-qnli": "task qnli is not fine-tuned (data not found at "
       "{data}/glue/QNLI/train.tsv): the analyses read the tasks ingest wrote"
       for variant in ("full", "no_pretrain", "no_aux", "lstm")},
    "zero_shot@race": "task race is not fine-tuned (data not found at "
                      "{data}/multiple_choice/RACE/train/middle (and 5 more)): the analyses read "
                      "the tasks ingest wrote"}


def metrics_of(repo: Path, task: str) -> dict:
    return json.loads((repo / "metrics" / "finetune" / f"{task}.json").read_text())


@pytest.mark.long
def test_dvc_repro_end_to_end(reproduced: Reproduced) -> None:
    tiny_repo, heldout = reproduced.repo, HELD_OUT_BOOK
    params = load_params(tiny_repo / "params.yaml")
    assert ran_stages(reproduced.stdout) == E2E_STAGES
    # what params name but is no stage exists in no form: declared by DVC neither
    declared = declared_stages(tiny_repo)
    assert declared == E2E_STAGES
    assert not [stage for stage in declared if stage.startswith("predict@")]
    for stage in E2E_NOT_RUN:
        assert stage not in declared, stage
    assert not (tiny_repo / "metrics" / "finetune" / "qnli.json").exists()
    assert not (tiny_repo / "metrics" / "stages" / "finetune" / "qnli.json").exists()
    outputs = declared_outputs(tiny_repo)
    assert len(outputs) >= 10
    for path in outputs:
        assert path.exists(), f"declared output {path} missing"
    # the README's two commands in order: the pipeline's output folders (dvclive/ is also a
    # package's name) must not change how the lint sorts imports
    run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], tiny_repo)

    report = (tiny_repo / "reports" / "summary.md").read_text()
    lm_eval = json.loads((tiny_repo / "metrics" / "lm_eval.json").read_text())
    scored = lm_eval["files"][heldout]
    assert lm_eval["run"] and scored["tokens"] > scored["words"] > 10_000
    assert scored["word_loss"] > scored["loss"] > 0  # a word is a token or more
    assert f"| {heldout} | {scored['tokens']:,} | {scored['words']:,} |" in report
    sst2 = metrics_of(tiny_repo, "sst2")
    assert f"| SST-2 | accuracy | {sst2['accuracy']:.1f} |" in report  # one epoch: no curve
    assert sst2["eval_examples"] == {"dev": 100} and sst2["train_examples"] == 300
    assert 0 <= sst2["majority_accuracy"] <= 100  # the floor the report sets beside it
    assert (sst2["compute"]["device"], sst2["compute"]["processes"]) == ("cpu", 1)
    for page in ("index.html", "headline.txt", "plots/finetune.png", "plots/pretraining.png"):
        assert (tiny_repo / "reports" / page).is_file(), page
    assert "SST-2 accuracy (dev)" in (tiny_repo / "reports" / "headline.txt").read_text()
    generated = json.loads((tiny_repo / "artifacts" / "lm_eval" / "generated.json").read_text())
    assert generated["continuation"] and generated["seed"] == params.lm_eval.sample.seed
    # `finetune.tasks: all` runs one task of each family from the real data, and lists the
    # tasks whose data is absent with the path it expected
    for task in ("cola", "rte", "mrpc", "stsb", "story_cloze"):
        metrics = metrics_of(tiny_repo, task)
        assert metrics["run"] and metrics["train_examples"] == 300, task
    assert "- QNLI: data not found at " in report
    assert "glue/QNLI/train.tsv" in report  # the one QNLI file ../shared/data lacks
    data = params.ingest.root
    assert f"- RACE: {E2E_NOT_RUN['finetune@race'].format(data=data)}" in report
    manifest = json.loads((tiny_repo / "data" / "shards" / "manifest.json").read_text())
    assert manifest["dtype"] == "uint16" and manifest["splits"]["val"]["tokens"] > 0

    # Metrics and plots are declared, so DVC shows them with no extra code.
    metrics = json.loads(dvc("metrics", "show", "--json", cwd=tiny_repo).stdout)
    shown = next(iter(metrics.values()))["data"]  # the workspace's
    shown_sst2 = shown["metrics/finetune/sst2.json"]["data"]
    assert {k: shown_sst2[k] for k in ("accuracy", "accuracy_min", "accuracy_max", "by_seed")} \
        == {k: sst2[k] for k in ("accuracy", "accuracy_min", "accuracy_max", "by_seed")}
    assert "val_loss" in shown["metrics/pretrain.json"]["data"]
    record = shown["metrics/stages/finetune/sst2.json"]["data"]  # each stage's wall time
    assert record["stage"] == "finetune@sst2" and record["seconds"] > 0
    plots = json.loads(dvc("plots", "show", "--json", cwd=tiny_repo).stdout)
    curves = {row["filename"] for row in plots["data"]["pretraining loss"][0]["content"]["data"]
              ["values"]}
    assert curves == {"train/loss.tsv", "val/loss.tsv"}

    # Nothing changed: nothing runs.
    second = dvc("repro", cwd=tiny_repo)
    assert ran_stages(second.stdout) == []
    assert "up to date" in dvc("status", cwd=tiny_repo).stdout

    # One task's override re-runs the stages that fine-tune or score that task, and the report
    # (ingest reads the registry too; of its outputs only SST-2's entry, in SST-2's folder,
    # changes, so nothing else follows;
    # SST-2 names no files.predict: no predict@sst2 to re-run).
    edit_params(tiny_repo, **{"tasks.sst2.overrides": {"epochs": 2}})
    third = dvc("repro", cwd=tiny_repo)
    assert ran_stages(third.stdout) == ["ingest", "finetune@sst2", "ablation@full-sst2",
                                        "ablation@no_pretrain-sst2", "ablation@no_aux-sst2",
                                        "ablation@lstm-sst2", "zero_shot@sst2", "report"]
    assert [len(run["epochs"]) for run in metrics_of(tiny_repo, "sst2")["runs"]] == [2]

    # `dvc repro finetune@<task>` brings one task up to date, alone (every family's fine-tuning
    # ran in the first `dvc repro`).
    for task in ("story_cloze",):
        edit_params(tiny_repo, **{f"tasks.{task}.overrides": {"epochs": 2}})
        single = dvc("repro", f"finetune@{task}", cwd=tiny_repo)
        assert ran_stages(single.stdout) == ["ingest", f"finetune@{task}"], task
        assert [len(run["epochs"]) for run in metrics_of(tiny_repo, task)["runs"]] == [2], task

    # One task, forced, alone.
    forced = dvc("repro", "-s", "-f", "finetune@sst2", cwd=tiny_repo)
    assert ran_stages(forced.stdout) == ["finetune@sst2"]

    # Checkpoints persist across runs of the stage (DVC removes its declared outputs first, and
    # they are not one): a forced pretrain resumes from the final one, writing the same weights.
    weights = tiny_repo / "artifacts" / "pretrain" / "model.safetensors"
    before = sha256_file(weights)
    again = dvc("repro", "-s", "-f", "pretrain", cwd=tiny_repo)
    assert "resumed from the checkpoint of step 20" in again.stderr
    assert sha256_file(weights) == before

    # A task asked for by name whose data is absent stops the pipeline, naming the file.
    edit_params(tiny_repo, **{"finetune.tasks": ["sst2", "qnli"]})
    failed = dvc("repro", "ingest", cwd=tiny_repo, check=False)
    assert failed.returncode != 0
    assert "task qnli (in finetune.tasks): data not found at " in failed.stderr
    assert "glue/QNLI/train.tsv; see tasks.qnli.files" in failed.stderr


def test_a_second_dvc_repro_while_one_holds_the_repo_lock_fails_and_changes_nothing(
        tmp_path: Path) -> None:
    """Two `dvc repro` at once in one checkout: the second finds DVC's repository lock held
    (here by this test, with DVC's own lock, as a running `dvc repro` holds it while it
    collects the stages and writes dvc.lock), tries for a few seconds, and fails in one line
    with DVC's exit code 255, before any stage runs: dvc.lock and the stage records as they
    were (docs/troubleshooting.md, "Two dvc repro at once")."""
    for name in ("dvc.yaml", "params.yaml", "dag.yaml", "dvc.lock"):
        shutil.copy(REPO / name, tmp_path / name)
    Repo.init(str(tmp_path), no_scm=True).close()
    before = {p.relative_to(tmp_path): p.read_bytes() for p in tmp_path.rglob("*")
              if p.is_file() and ".dvc" not in p.parts}
    with Repo(str(tmp_path)) as held:
        held.lock.lock()
        try:
            proc = dvc("repro", cwd=tmp_path, check=False)
        finally:
            held.lock.unlock()
    assert proc.returncode == 255, proc.stdout + proc.stderr
    assert proc.stderr.startswith("ERROR: Unable to acquire lock. Most likely another DVC "
                                  "process is running") and proc.stderr.count("\n") == 1
    assert "Running stage" not in proc.stdout
    assert {p.relative_to(tmp_path): p.read_bytes() for p in tmp_path.rglob("*")
            if p.is_file() and ".dvc" not in p.parts} == before
