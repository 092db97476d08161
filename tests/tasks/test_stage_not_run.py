"""The fine-tuning stages (finetune, ablation, transfer) on a task that ingest gave no data: the
files that say why, byte for byte as the report and `dvc metrics show` read them, written without
importing torch (seconds a not-run stage would pay for nothing); a damaged status.json is bad
input naming itself and the stage that writes it."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from gpt1.config import parse_params, read_yaml
from gpt1.errors import InputError
from tests.conftest import REPO, run

REASON = "not in finetune.tasks"


def _params_file(tmp_path: Path) -> Path:
    raw = read_yaml((REPO / "params.yaml").read_text(encoding="utf-8"))
    raw["analysis"]["ablation"]["tasks"] = {"sst2": [500]}
    raw["analysis"]["transfer"]["tasks"] = {"sst2": 500}
    parse_params(raw)  # valid as written
    path = tmp_path / "params.json"
    path.write_text(json.dumps(raw), encoding="utf-8")  # JSON is YAML 1.2
    return path


def _status(root: Path, folder: str, record: dict) -> None:
    path = root / folder / "status.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(record, indent=2) + "\n")


def _run_stage(tmp_path: Path, stage: str, **args: str) -> bool:
    """Run `tasks.<stage>.run` in a fresh interpreter in `tmp_path`; whether torch got imported."""
    code = ("import json, sys\n"
            "from pathlib import Path\n"
            "from gpt1.config import load_params\n"
            f"import tasks.{stage} as stage\n"
            f"stage.run(load_params(Path({str(_params_file(tmp_path))!r})), **{args!r})\n"
            "print(json.dumps('torch' in sys.modules))\n")
    env = {"PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return json.loads(run([sys.executable, "-c", code], tmp_path, env=env).stdout)


def _metrics(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def test_finetune_records_why_not_in_its_folder_and_metrics(tmp_path: Path) -> None:
    _status(tmp_path, "data/raw/tasks/sst2", {"run": False, "reason": REASON})
    assert _run_stage(tmp_path, "finetune", task="sst2") is False
    assert _metrics(tmp_path / "metrics/finetune/sst2.json") == (
        '{\n  "task": "sst2",\n  "run": false,\n  "reason": "not in finetune.tasks"\n}\n')
    assert os.listdir(tmp_path / "artifacts/finetune/sst2") == ["status.json"]
    assert _metrics(tmp_path / "artifacts/finetune/sst2/status.json") == (
        '{"run": false, "reason": "not in finetune.tasks"}\n')


def test_transfer_records_why_not(tmp_path: Path) -> None:
    _status(tmp_path, "data/raw/tasks/sst2", {"run": False, "reason": REASON})
    assert _run_stage(tmp_path, "transfer", task="sst2") is False
    assert _metrics(tmp_path / "metrics/transfer/sst2.json") == (
        '{\n  "task": "sst2",\n  "run": false,\n  "reason": "task sst2: not in finetune.tasks"\n'
        "}\n")


def test_ablation_records_why_not(tmp_path: Path) -> None:
    _status(tmp_path, "data/raw/tasks/sst2", {"run": False, "reason": REASON})
    assert _run_stage(tmp_path, "ablation", variant="no_aux", task="sst2") is False
    assert _metrics(tmp_path / "metrics/ablation/no_aux/sst2.json") == (
        '{\n  "variant": "no_aux",\n  "task": "sst2",\n  "run": false,\n'
        '  "reason": "task sst2: not in finetune.tasks"\n}\n')


def test_an_lstm_not_pretrained_is_said_before_the_task_is_read(tmp_path: Path) -> None:
    # no data/raw/tasks/sst2/status.json: reading it would fail
    (tmp_path / "artifacts/pretrain_lstm").mkdir(parents=True)
    (tmp_path / "artifacts/pretrain_lstm/status.json").write_text(
        '{"run": false, "reason": "lstm is not in analysis.ablation.variants"}\n')
    assert _run_stage(tmp_path, "ablation", variant="lstm", task="sst2") is False
    assert json.loads(_metrics(tmp_path / "metrics/ablation/lstm/sst2.json")) == {
        "variant": "lstm", "task": "sst2", "run": False,
        "reason": "the LSTM was not pretrained (lstm is not in analysis.ablation.variants)"}


@pytest.mark.parametrize(("stage", "args"), [("finetune", {"task": "sst2"}),
                                             ("transfer", {"task": "sst2"}),
                                             ("ablation", {"variant": "full", "task": "sst2"})])
def test_a_damaged_task_status_names_itself_and_ingest(tmp_path: Path, stage: str,
                                                       args: dict[str, str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    from gpt1.config import load_params

    params = load_params(_params_file(tmp_path))
    status = Path("data/raw/tasks/sst2/status.json")
    (tmp_path / status).parent.mkdir(parents=True)
    (tmp_path / status).write_text('{"run": fal')  # cut short
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match=rf"^{status}: damaged, not the JSON stage ingest "
                                         r"writes .*; run `dvc repro --force ingest`"):
        importlib.import_module(f"tasks.{stage}").run(params, **args)
    assert not Path("metrics").exists()
