"""`gpt1 predict` on the shared reproduced pipeline: for a task of every family, the fine-tuned
model folder alone (no params.yaml) predicts ingest's dev rows exactly as the finetune stage
did (its dev_predictions.tsv); and `predict@<task>` of a task without `files.predict` writes a
table of no rows saying why."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from gpt1.jobs.predict import predict_file
from tests.conftest import Reproduced

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


def test_predict_stage_without_a_file_says_why(reproduced_once: Reproduced) -> None:
    table = pq.read_table(reproduced_once.repo / "predictions" / "sst2.parquet")
    assert table.num_rows == 0
    assert table.schema.metadata[b"gpt1.not_run"] == b"no files.predict in its registry entry"
