"""gpt1.downstream.families: each family's normalised table and what a registry entry implies."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from gpt1.config import load_params
from gpt1.downstream.families import n_outputs, split_paths, task_schema

TASKS = load_params(Path(__file__).resolve().parents[1] / "params.yaml").tasks


def test_schema_per_family() -> None:
    assert task_schema(TASKS["sst2"]).names == ["idx", "text", "label"]
    assert task_schema(TASKS["rte"]).names == ["idx", "premise", "hypothesis", "label"]
    assert task_schema(TASKS["mrpc"]).names == ["idx", "text_a", "text_b", "label"]
    assert task_schema(TASKS["race"]).names == ["idx", "context", "question", "choices",
                                                "label"]
    assert task_schema(TASKS["race"]).field("choices").type == pa.list_(pa.string())
    assert task_schema(TASKS["mrpc"]).field("label").type == pa.int64()
    assert task_schema(TASKS["stsb"]).field("label").type == pa.float64()  # regression


def test_head_outputs() -> None:
    assert n_outputs(TASKS["sst2"]) == 2
    assert n_outputs(TASKS["mnli"]) == 3
    assert n_outputs(TASKS["stsb"]) == 1  # a score
    assert n_outputs(TASKS["story_cloze"]) == 1  # a scalar per choice


def test_split_paths() -> None:
    assert split_paths(TASKS["sst2"], "dev") == ["glue/SST-2/dev.tsv"]
    assert split_paths(TASKS["race"], "train") == ["multiple_choice/RACE/train/middle",
                                                   "multiple_choice/RACE/train/high"]
