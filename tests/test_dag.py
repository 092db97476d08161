"""Only what params request becomes a stage: the lists gpt1.dag resolves, checked against what
DVC itself declares from dvc.yaml with them, and against the rules docs/pipeline.md states."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gpt1 import dag
from gpt1.config import Params, ParamsError, load_params
from gpt1.presets.edit import ANALYSIS_TASKS
from tests.conftest import REPO
from tests.report_fixtures import params_with as report_params_with

SAMPLE = REPO / "gpt1" / "sample_data"


def params_with(**dotted: object) -> Params:
    """The repository's params.yaml with `dotted` keys set, an analysis's tasks replaced whole."""
    return report_params_with(ANALYSIS_TASKS, **dotted)


SAMPLE_TASKS = {"cola", "sst2", "mrpc", "rte", "stsb", "story_cloze"}  # its glue/ and more


def declared_by_dvc(params_yaml: str, tmp_path: Path) -> list[str]:
    """The stage addresses DVC resolves from the repository's dvc.yaml in a scratch repository
    holding that dvc.yaml, `params_yaml` and the dag.yaml `gpt1 dag` writes for it."""
    from dvc.repo import Repo

    shutil.copy(REPO / "dvc.yaml", tmp_path / "dvc.yaml")
    (tmp_path / "params.yaml").write_text(params_yaml, encoding="utf-8")
    Repo.init(str(tmp_path), no_scm=True)
    dag.write(tmp_path)
    with Repo(str(tmp_path)) as repo:
        return [stage.name for stage in repo.index.stages]


def test_the_committed_dag_file_is_what_params_yaml_asks_for() -> None:
    params = load_params(REPO / "params.yaml")
    assert (REPO / dag.DAG_FILE).read_text(encoding="utf-8") == dag.render(
        dag.resolve(params, REPO))


def test_the_quick_start_declares_no_stage_without_work() -> None:
    """The bundled params: SST-2 fine-tuned and analysed, nothing for the eleven other tasks,
    no prediction file, no LSTM; dvc.yaml declares exactly these."""
    from dvc.repo import Repo

    resolved = dag.resolve(load_params(REPO / "params.yaml"), REPO)
    assert resolved.stages() == [
        "code", "ingest", "clean", "bpe", "tokenize", "pretrain", "finetune@sst2", "lm_eval",
        "ablation@full-sst2", "ablation@no_pretrain-sst2", "ablation@no_aux-sst2",
        "transfer@sst2", "zero_shot@sst2", "report"]
    with Repo(str(REPO)) as repo:
        assert sorted(s.addressing for s in repo.index.stages) == sorted(resolved.stages())
    assert resolved.not_run == {f"finetune@{task}": "not in finetune.tasks"
                                for task in ["cola", "snli", "mnli", "qnli", "rte", "scitail",
                                             "mrpc", "qqp", "stsb", "story_cloze", "race"]}


@pytest.mark.parametrize("case", ["all_on_the_sample", "lstm", "released", "predict"])
def test_dvc_declares_the_stages_resolved(case: str, tmp_path: Path) -> None:
    """DVC's own resolution of dvc.yaml over the dag.yaml written equals `Dag.stages()`."""
    from gpt1.presets.edit import set_keys

    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    changes: dict[str, object] = {
        "all_on_the_sample": {"finetune.tasks": "all", "ingest.root": str(SAMPLE),
                              "analysis.zero_shot.tasks": {"sst2": "sentiment",
                                                           "race": "choice"}},
        "lstm": {"finetune.tasks": ["sst2", "rte"],
                 "analysis.ablation.variants": ["full", "lstm"],
                 "analysis.ablation.tasks": {"sst2": [100], "rte": [None], "cola": [50]}},
        "released": {"pretrain.source": "hf", "pretrain.source_dir": "gpt",
                     "analysis.ablation.variants": ["full", "lstm"]},
        "predict": {"finetune.tasks": ["sst2", "cola"],
                    "tasks.cola.files.predict": "glue/CoLA/test.tsv"},
    }[case]
    set_keys(tmp_path / "params.yaml", changes)
    params = load_params(tmp_path / "params.yaml")
    resolved = dag.resolve(params, tmp_path)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    declared = declared_by_dvc((tmp_path / "params.yaml").read_text(encoding="utf-8"), scratch)
    assert sorted(declared) == sorted(resolved.stages())
    expected = {
        "all_on_the_sample": lambda s: {f"finetune@{t}" for t in SAMPLE_TASKS} <= set(s)
        and "zero_shot@race" not in s and "finetune@snli" not in s,
        "lstm": lambda s: {"pretrain_control@lstm", "ablation@lstm-sst2", "ablation@lstm-rte"}
        <= set(s) and not any("cola" in x for x in s),
        "released": lambda s: "pretrain_control@lstm" not in s
        and "ablation@lstm-sst2" not in s and "ablation@full-sst2" in s,
        "predict": lambda s: "predict@cola" in s and "predict@sst2" not in s,
    }[case]
    assert expected(declared), declared


def test_all_fine_tunes_every_task_with_data_and_says_why_not_for_the_others() -> None:
    params = params_with(**{"finetune.tasks": "all", "ingest.root": str(SAMPLE)})
    resolved = dag.resolve(params)
    assert set(resolved.finetune) == SAMPLE_TASKS
    assert list(resolved.finetune) == [t for t in params.tasks if t in SAMPLE_TASKS]
    for task in set(params.tasks) - SAMPLE_TASKS:
        assert resolved.not_run[f"finetune@{task}"].startswith(
            f"data not found at {SAMPLE}"), task


def test_an_analysis_of_a_task_not_fine_tuned_is_no_stage_and_says_why() -> None:
    params = params_with(**{
        "finetune.tasks": ["sst2"],
        "analysis.ablation.variants": ["full", "no_aux"],
        "analysis.ablation.tasks": {"sst2": [100], "rte": [None]},
        "analysis.transfer.tasks": {"cola": 100},
        "analysis.zero_shot.tasks": {"sst2": "sentiment", "story_cloze": "choice"}})
    resolved = dag.resolve(params)
    assert resolved.ablation == dag.Ablation(["full", "no_aux"], ["sst2"])
    assert resolved.transfer == [] and resolved.zero_shot == ["sst2"]
    for address in ["ablation@full-rte", "ablation@no_aux-rte", "transfer@cola",
                    "zero_shot@story_cloze"]:
        assert "is not fine-tuned (not in finetune.tasks)" in resolved.not_run[address]


@pytest.mark.parametrize(("variants", "tasks", "source", "control"), [
    (["full", "lstm"], {"sst2": [100]}, "train", ["lstm"]),
    (["full", "no_aux"], {"sst2": [100]}, "train", []),
    (["full", "lstm"], {}, "train", []),  # no cell to fine-tune it
    (["full", "lstm"], {"sst2": [100]}, "hf", []),
])
def test_the_lstm_is_pretrained_only_for_table_5s_row(variants: list[str],
                                                      tasks: dict[str, list[int]], source: str,
                                                      control: list[str]) -> None:
    released = {"pretrain.source_dir": "gpt"} if source != "train" else {}
    params = params_with(**{"finetune.tasks": ["sst2"], "analysis.ablation.variants": variants,
                            "analysis.ablation.tasks": tasks, "pretrain.source": source,
                            **released})
    resolved = dag.resolve(params)
    assert resolved.control == control
    assert resolved.control_model == ("artifacts/pretrain_lstm" if control
                                      else "artifacts/pretrain")
    if source != "train":
        assert "lstm" not in resolved.ablation.variants
        assert resolved.not_run["ablation@lstm-sst2"].startswith("pretrain.source is hf")
        assert "pretrain_control@lstm" in resolved.not_run


def test_a_stale_dag_file_is_written_anew_and_refused(tmp_path: Path) -> None:
    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    params = load_params(tmp_path / "params.yaml")
    assert dag.write(tmp_path, params) is True
    dag.check(tmp_path, params)  # current: nothing said
    assert dag.write(tmp_path, params) is False
    asked = params_with(**{"finetune.tasks": ["sst2", "cola"]})
    with pytest.raises(ParamsError, match=r"dag.yaml: .*run `dvc repro` again"):
        dag.check(tmp_path, asked)
    assert "finetune: [\"cola\", \"sst2\"]" in (tmp_path / dag.DAG_FILE).read_text()
    dag.check(tmp_path, asked)
