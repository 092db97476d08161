"""tasks.report: the stage writes the report of a small run's files (tests/report_fixtures.py):
the summary's sections in order with their plots and figures, the HTML page and the headline."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks import report
from tests.conftest import assert_tables_well_formed
from tests.report_fixtures import PARAMS, write_run


def test_the_stage_writes_the_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_run(tmp_path)
    (tmp_path / "metrics" / "stages" / "report.json").unlink()  # DVC removes it first
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DVC_ROOT", raising=False)
    report.run(PARAMS)
    text = (tmp_path / "reports" / "summary.md").read_text()
    assert text.startswith("# gpt1 run report\n")
    assert text.index("## What ran") < text.index("## Headline results") \
        < text.index("## Pretraining") < text.index("## Fine-tuning") \
        < text.index("## Ablations (Table 5)") < text.index("## Layers transferred") \
        < text.index("## Zero-shot behaviour") < text.index("## Held-out text") \
        < text.index("## Text the pretrained model writes") < text.index("## Files of this run")
    for plot in ("pretraining", "finetune", "table5", "transfer", "zero_shot"):
        assert f"(plots/{plot}.png)" in text
        assert (tmp_path / "reports" / "plots" / f"{plot}.png").is_file()
    assert "| Transformer w/ aux LM (full) | 80.1 [79.0, 81.2] |" in text
    assert "- wall time: 3 min 29 s over 5 stages" in text  # 1.5 + 12.25 + 120.5 + 30 + 45
    assert_tables_well_formed(text.splitlines())
    assert (tmp_path / "reports" / "index.html").read_text().startswith("<!DOCTYPE html>")
    headline = (tmp_path / "reports" / "headline.txt").read_text().splitlines()
    assert headline[0].startswith("gpt1 run report: preset ") and len(headline) <= 12
