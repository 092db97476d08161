"""gpt1.reporting.facts: what the report's first screen says ran: the preset params.yaml
matches, the bundled sample, each stage's wall time, the machine and where each stage computes.
(Gathered with the commit by gpt1.jobs.report.run_facts: tests/jobs/test_report.py.)"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from gpt1.config import load_params
from gpt1.presets.edit import apply_preset, available, load_preset
from gpt1.reporting.facts import (
    REAL_DATA_COMMAND,
    duration,
    infer_preset,
    is_sample,
    leaves,
    stage_times,
    where_trained,
)
from tests.compute_records import GPU_NODE, LAPTOP, trained
from tests.conftest import REPO, run

PRESETS = {"small": {"model": {"n_layer": 2, "n_embd": 32}, "pretrain": {"lr": 0.001}},
           "big": {"model": {"n_layer": 12, "n_embd": 768}, "pretrain": {"lr": 2.5e-4},
                   "analysis": {"seeds": [1, 2, 3]}}}


def _params(**sections: dict) -> dict:
    base = {"model": {"n_layer": 2, "n_embd": 32, "n_head": 2},
            "pretrain": {"lr": 0.001, "max_steps": 20}, "analysis": {"seeds": [1]}}
    return {**base, **sections}


def test_a_params_tree_matching_every_key_of_a_preset_is_that_preset() -> None:
    match = infer_preset(_params(), PRESETS)
    assert match is not None and match.name == "small" and match.exact
    assert match.describe() == "small"
    # numbers compare as YAML reads them: 1e-3 is 0.001, 2 is 2.0
    assert infer_preset(_params(pretrain={"lr": 1e-3}, model={"n_layer": 2.0, "n_embd": 32}),
                        PRESETS).exact


def test_otherwise_custom_with_the_closest_preset_and_the_keys_that_differ() -> None:
    match = infer_preset(_params(pretrain={"lr": 0.002}), PRESETS)
    assert match.name == "small" and match.differences == {"pretrain.lr": (0.002, 0.001)}
    assert match.describe() == "custom: closest to small, which differs in pretrain.lr 0.002 " \
        "(preset: 0.001)"
    # 12 layers and 768 wide, the rest small's: big differs in 2 keys (lr, seeds), small in 2
    # (n_layer, n_embd): the tie goes to the preset of more keys, then the name
    both = infer_preset(_params(model={"n_layer": 12, "n_embd": 768}), PRESETS)
    assert both.name == "big" and set(both.differences) == {"pretrain.lr", "analysis.seeds"}


def test_a_key_the_params_lack_differs() -> None:
    match = infer_preset({"model": {"n_layer": 2}}, {"small": PRESETS["small"]})
    assert match.differences == {"model.n_embd": (None, 32), "pretrain.lr": (None, 0.001)}


def test_leaves_are_dotted_keys_and_lists_are_leaves() -> None:
    assert leaves({"a": {"b": 1, "c": [1, 2]}, "d": {}}) == {"a.b": 1, "a.c": [1, 2], "d": {}}


@pytest.mark.parametrize("name", available())
def test_each_bundled_preset_applied_is_recognised(name: str, tmp_path: Path) -> None:
    params = tmp_path / "params.yaml"
    params.write_text((REPO / "params.yaml").read_text())
    apply_preset(name, params)
    match = infer_preset(load_params(params).model_dump())
    assert match is not None and match.exact
    # where two presets set the same values, the one of more keys is named: it then says more
    assert set(leaves(load_preset(name))) <= set(leaves(load_preset(match.name)))


def test_the_bundled_sample_is_recognised(tmp_path: Path) -> None:
    assert is_sample("gpt1/sample_data", REPO)
    assert is_sample("gpt1/sample_data/", tmp_path)
    assert is_sample(str(REPO / "gpt1" / "sample_data"), tmp_path)
    assert not is_sample("../shared/data", REPO)


def test_the_real_data_command_names_real_subcommands_and_a_preset() -> None:
    first, second, third = REAL_DATA_COMMAND.split(" && ")
    assert first == "gpt1 set ingest.root=../shared/data"
    assert second.startswith("gpt1 preset ") and second.split()[-1] in available()
    assert third == "dvc repro"
    for command in (first, second):
        words = command.split()
        help_text = run(["python", "-m", "gpt1.cli", words[1], "--help"], REPO).stdout
        assert "Usage" in help_text


def test_stage_times_in_pipeline_order_without_stale_records() -> None:
    records = [{"stage": "finetune@sst2", "seconds": 30.0, "finished": "2025-01-01T10:02:00",
                "commit": "abc", "uncommitted_changes": False},
               {"stage": "ingest", "seconds": 1.5, "finished": "2025-01-01T10:00:00",
                "commit": "abc", "uncommitted_changes": False},
               {"stage": "finetune@gone", "seconds": 9.0, "finished": "2024-01-01T10:00:00",
                "commit": "old", "uncommitted_changes": False}]
    times = stage_times(records, ["ingest", "clean", "finetune@sst2", "report"])
    assert times["stage"].to_list() == ["ingest", "finetune@sst2"]
    assert times["seconds"].sum() == 31.5
    assert stage_times([], ["ingest"]).schema["seconds"] == pl.Float64


@pytest.mark.parametrize(("seconds", "shown"), [(12.46, "12.5 s"), (75.3, "1 min 15 s"),
                                                (3600 + 125, "1 h 02 min")])
def test_duration(seconds: float, shown: str) -> None:
    assert duration(seconds) == shown


def test_the_machine_line_names_the_cpu_capability_threads_and_versions() -> None:
    import platform

    import torch

    from gpt1.machine import machine, machine_line

    info = machine()
    assert info["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert info["threads"] == torch.get_num_threads()
    assert info["amx"] == torch.cpu._is_amx_tile_supported()
    assert info["native_bf16"] == bool(torch.cpu._is_amx_tile_supported()
                                       or torch.cpu._is_avx512_bf16_supported())
    line = machine_line({"python": "3.11.2", "torch": "2.9.0", "cpu": "x86_64",
                         "cpu_capability": "AVX2", "threads": 2})
    assert line == ("machine: CPU x86_64 with AVX2 kernels, 2 torch threads; torch 2.9.0, "
                    "Python 3.11.2")
    assert "with AVX512 kernels (native bf16)," in machine_line(
        {**info, "cpu_capability": "AVX512", "native_bf16": True, "amx": False})
    assert "with AVX512 kernels (native bf16, AMX)," in machine_line(
        {**info, "cpu_capability": "AVX512", "native_bf16": True, "amx": True})
    assert ", GPU H100" in machine_line({**info, "gpu": "H100"})
    assert "kernels, 1 torch thread;" in machine_line({**info, "cpu_capability": "AVX2",
                                                      "native_bf16": False, "threads": 1})
    assert machine_line(info).endswith(f"Python {platform.python_version()}")


def test_where_trained_is_what_the_metrics_files_record_not_this_machine() -> None:
    pretrain = {"run": True, "compute": trained(GPU_NODE, "cuda", "bfloat16", True, 8)}
    finetune = {"sst2": {"run": True, "compute": trained(LAPTOP)},
                "rte": {"run": True, "compute": trained(LAPTOP)},
                "qnli": {"run": False, "reason": "data not found"}}
    assert where_trained(pretrain, finetune) == [
        ("pretraining", "cuda x 8 processes, bf16 autocast, compiled; CPU x86_64 with AVX512 "
                        "kernels (native bf16), 16 torch threads, GPU NVIDIA H200; torch "
                        "2.11.0+cu130, Python 3.12.3"),
        ("fine-tuning", "cpu, fp32; CPU x86_64 with AVX2 kernels, 2 torch threads; torch 2.9.0, "
                        "Python 3.11.2")]
    # fine-tuned where it pretrained; one task on other settings is named with its own
    finetune["sst2"]["compute"] = trained(GPU_NODE, "cuda", "bfloat16")
    finetune["rte"]["compute"] = trained(GPU_NODE, "cuda")
    assert where_trained(pretrain, finetune)[1] == (
        "fine-tuning", "sst2: cuda, bf16 autocast; the same machine; rte: cuda, fp32; the same "
                       "machine")


def test_where_trained_says_what_it_does_not_know() -> None:
    imported = {"run": True, "source": "openai", "source_dir": "model"}
    assert where_trained(imported, {"sst2": {"run": False}}) == [
        ("pretraining", "not here: the model was imported (pretrain.source openai)"),
        ("fine-tuning", "no task fine-tuned")]
    assert where_trained({"run": False, "reason": "no shards"}, {})[0] == (
        "pretraining", "not run: no shards")
    # files written before runs recorded where they computed
    assert where_trained({"run": True}, {"sst2": {"run": True}}) == [
        ("pretraining", "not recorded in its metrics file"),
        ("fine-tuning", "not recorded in its metrics file")]
