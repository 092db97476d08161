"""`gpt1 predict` on the shared reproduced pipeline: for a task of every family, the fine-tuned
model folder alone (no params.yaml) predicts ingest's dev rows exactly as the finetune stage
did (its dev_predictions.tsv); and a task without `files.predict` has no `predict@<task>` stage,
so no table."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from gpt1 import dag
from gpt1.config import PREDICT_SPLIT, load_params, read_yaml
from gpt1.jobs.predict import predict_file
from tests.conftest import Reproduced
from tests.e2e.test_dvc import ran_stages

pytestmark = pytest.mark.e2e

# a registry task of each family that the shared pipeline fine-tunes
FAMILY_TASKS = ["sst2", "rte", "mrpc", "stsb", "story_cloze"]


def stage_predictions(model: Path) -> list[str]:
    """The `prediction` column of the finetune stage's dev_predictions.tsv, in file order."""
    lines = (model / "dev_predictions.tsv").read_text().splitlines()[1:]
    return [line.split("\t")[1] for line in lines]


@pytest.mark.parametrize("task", FAMILY_TASKS)
def test_predict_equals_the_stage_dev_predictions(reproduced_once: Reproduced, tmp_path: Path,
                                                  task: str) -> None:
    repo = reproduced_once.repo
    model = tmp_path / "model"  # the folder alone, away from the checkout it was made in
    model.mkdir()
    for file in (repo / "artifacts" / "finetune" / task).iterdir():
        (model / file.name).write_bytes(file.read_bytes())
    out = tmp_path / "dev.parquet"
    predict_file(model, repo / "data" / "raw" / "tasks" / task / "dev.parquet", out)
    got = pq.read_table(out).column("prediction").to_pylist()
    expected = stage_predictions(model)
    if task == "stsb":  # scores, written to 3 decimals by the stage
        assert [f"{p:.3f}" for p in got] == expected
    elif task == "story_cloze":  # the stage numbers the chosen ending from 1, predict from 0
        assert [str(p + 1) for p in got] == expected
    else:
        assert got == expected
    assert len(got) == len(expected) > 0


def test_a_task_without_a_predict_file_has_no_predict_stage(reproduced_once: Reproduced) -> None:
    """`predict@<task>` exists only for a fine-tuned task whose registry entry names
    files.predict (gpt1.dag): none of the shared pipeline's does, so no predict stage was
    declared, ran or recorded, and no table of predictions was written."""
    repo = reproduced_once.repo
    params = load_params(repo / "params.yaml")
    assert not [t for t, task in params.tasks.items() if PREDICT_SPLIT in task.files]
    assert dag.resolve(params, repo).predict == []
    assert "predict: []" in (repo / dag.DAG_FILE).read_text()  # what DVC declared from
    assert not [s for s in ran_stages(reproduced_once.stdout) if s.startswith("predict@")]
    locked = read_yaml((repo / "dvc.lock").read_text())["stages"]
    assert "finetune@sst2" in locked and not [s for s in locked if s.startswith("predict@")]
    assert not (repo / "predictions").exists()
    assert not (repo / "metrics" / "stages" / "predict").exists()
