"""tasks.pretrain, the stage's own part of `pretrain` and `pretrain_lstm`: the exit code of a run
a signal stopped, and what the LSTM stage records when it has nothing to do, without torch."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import pytest

import gpt1.jobs.pretrain as job
from gpt1.training.checkpoint import StopRequested
from tests.conftest import REPO, run
from tests.tiny_pretrain import tiny_params

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_the_stage_exits_128_plus_the_signal_that_stopped_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tasks import pretrain as stage

    def stopped(*args: object) -> None:
        raise StopRequested(signal.SIGTERM, 3, Path("ckpt"))

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(job, "pretrain_job", stopped)
    with pytest.raises(SystemExit) as exited:
        stage.run(tiny_params())
    assert exited.value.code == 128 + signal.SIGTERM
    assert not (tmp_path / "metrics").exists()


NOT_RUN = """\
import json, sys
from pathlib import Path
from gpt1.config import load_params
from gpt1.presets.edit import nest, update_params
from tasks.pretrain import run
update_params(Path("params.yaml"), nest(json.loads(sys.argv[1])))
run(load_params("params.yaml"), "lstm")
print(json.dumps(sorted(m for m in sys.modules if m == "torch" or m.startswith("dvclive"))))
"""


@pytest.mark.parametrize(("changes", "reason"), [
    ({"analysis.ablation.variants": ["full"]}, "lstm is not in analysis.ablation.variants"),
    ({"pretrain.source": "hf", "pretrain.source_dir": "release"},
     "pretrain.source is hf: the LSTM control is pretrained only beside a Transformer "
     "pretrained here, on the same shards"),
])
def test_the_lstm_stage_records_why_it_did_not_run_without_importing_torch(
        tmp_path: Path, changes: dict[str, object], reason: str) -> None:
    (tmp_path / "params.yaml").write_bytes((REPO / "params.yaml").read_bytes())
    done = run([sys.executable, "-c", NOT_RUN, json.dumps(changes)], tmp_path,
               env={"PYTHONPATH": str(REPO)}, timeout=120)
    assert json.loads(done.stdout) == []  # neither torch nor dvclive
    assert (tmp_path / "metrics/pretrain_lstm.json").read_text() == (
        '{\n  "run": false,\n  "reason": "' + reason + '"\n}\n')
    assert (tmp_path / "artifacts/pretrain_lstm/status.json").read_text() == (
        '{"run": false, "reason": "' + reason + '"}\n')
    assert [p.name for p in (tmp_path / "artifacts/pretrain_lstm").iterdir()] == ["status.json"]
    for folder in ("dvclive/pretrain_lstm", "artifacts/checkpoints/pretrain_lstm"):
        assert list((tmp_path / folder).iterdir()) == []
