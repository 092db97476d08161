"""gpt1.records: the pipeline's own JSON files, and a damaged one named with the stage to re-run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpt1.errors import InputError, MissingInputError, is_input_error
from gpt1.records import (
    STATUS_FILE,
    Manifest,
    not_run_reason,
    read_record,
    record_not_run,
)


@pytest.mark.parametrize("text", ['{"splits": {"train": "cut', "", "[1, 2"])
def test_a_damaged_record_names_its_file_and_the_stage_to_rerun(tmp_path: Path,
                                                               text: str) -> None:
    path = tmp_path / "manifest.json"
    path.write_text(text)
    with pytest.raises(InputError) as raised:
        read_record(path, "tokenize", Manifest)
    message = str(raised.value)
    assert message.startswith(f"{path}: damaged, not the JSON stage tokenize writes (")
    assert message.endswith("run `dvc repro --force tokenize` to write it again")


def test_a_missing_record_is_the_users_file_system_error(tmp_path: Path) -> None:
    with pytest.raises(MissingInputError) as raised:
        read_record(tmp_path / "absent.json", "tokenize", Manifest)
    assert is_input_error(raised.value, user_paths=[])  # wherever it lies
    assert str(raised.value) == f"{tmp_path / 'absent.json'}: not found (run tokenize first)"


def test_a_stage_with_nothing_to_do_records_why(tmp_path: Path) -> None:
    model, metrics = tmp_path / "model", tmp_path / "metrics" / "m.json"
    (model / "old.bin").parent.mkdir()
    (model / "old.bin").write_text("stale")
    record_not_run("lstm is not in analysis.ablation.variants", (model,), metrics, task="sst2")
    assert sorted(p.name for p in model.iterdir()) == [STATUS_FILE]
    assert json.loads(metrics.read_text()) == {
        "task": "sst2", "run": False, "reason": "lstm is not in analysis.ablation.variants"}
    assert not_run_reason(model, "pretrain_lstm") == "lstm is not in analysis.ablation.variants"
    assert not_run_reason(tmp_path / "ran", "pretrain") is None
    (model / STATUS_FILE).write_text('{"run": tr')
    with pytest.raises(InputError, match=r"dvc repro --force pretrain_lstm"):
        not_run_reason(model, "pretrain_lstm")
