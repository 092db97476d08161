"""gpt1.jobs.report: run_facts gathers what the report's first screen says ran, the commit, the
preset params.yaml matches, the sample, where each stage computed and each stage's wall time (the
report's own, stale, left out)."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from gpt1.config import load_params
from gpt1.jobs.report import run_facts
from gpt1.presets.edit import apply_preset, available
from gpt1.reporting.facts import is_sample, where_trained
from tests.compute_records import LAPTOP, trained
from tests.conftest import REPO


def test_run_facts_gather_commit_preset_sample_machine_and_stage_times(tmp_path: Path) -> None:
    path = tmp_path / "params.yaml"
    path.write_text((REPO / "params.yaml").read_text())
    apply_preset("tiny", path)
    params = load_params(path)
    records = [{"stage": "report", "seconds": 2.0, "finished": "2025-01-01T10:05:00",
                "commit": "abc", "uncommitted_changes": False},
               {"stage": "ingest", "seconds": 1.5, "finished": "2025-01-01T10:00:00",
                "commit": "abc", "uncommitted_changes": False}]
    pretrain = {"run": True, "compute": trained(LAPTOP, "cpu", "bfloat16")}
    finetune = {"sst2": {"run": True, "compute": trained(LAPTOP)}}
    found: Any = SimpleNamespace(data=SimpleNamespace(  # what it reads of a Run
        stages=records, pretrain=pretrain, finetune=finetune))
    facts = run_facts(params, found, REPO, {"commit": "abc", "uncommitted_changes": 0})
    assert (facts.commit, facts.uncommitted_changes) == ("abc", False)
    assert facts.preset in available()  # matched exactly: named
    assert facts.data_root == params.ingest.root
    assert facts.sample is is_sample(params.ingest.root, REPO)
    assert facts.trained == where_trained(pretrain, finetune)
    assert facts.stages["stage"].to_list() == ["ingest"]  # the report's own, stale, left out
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", facts.built)
    changed = params.model_copy(update={"model": params.model.model_copy(update={"n_layer": 7})})
    custom = run_facts(changed, found, tmp_path, {"commit": None, "uncommitted_changes": True})
    assert custom.preset.startswith("custom: closest to ") and "model.n_layer 7" in custom.preset
    assert (custom.commit, custom.uncommitted_changes) == (None, True)
