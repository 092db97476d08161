"""gpt1.downstream.families: each family's table, input layout, head and targets, one object each,
and the names `params.yaml` is validated against."""

from __future__ import annotations

import typing
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import torch

from gpt1.config import FAMILY_FIELDS, FAMILY_MIN_CTX, Family, TaskParams, load_params
from gpt1.corpus.tokenizer import CLASSIFY, DELIM, START
from gpt1.downstream.families import FAMILIES, ChoiceFamily, TaskFamily, family_of

TASKS = load_params(Path(__file__).resolve().parents[2] / "params.yaml").tasks


def task(family: Family, labels: list[str] | None) -> TaskParams:
    metrics = ["pearson"] if family == "similarity" and labels is None else ["accuracy"]
    return TaskParams(title="toy", family=family, reader="toy", labels=labels, metrics=metrics,
                      files={"train": "train.tsv", "dev": "dev.tsv"})


def test_registry_holds_the_families_config_accepts() -> None:
    """A new family is its object in FAMILIES and its name in config's `Family`."""
    assert set(FAMILIES) == set(typing.get_args(Family))
    assert all(family.name == name for name, family in FAMILIES.items())


def test_config_knows_each_familys_fields() -> None:
    """`reader: table` maps a file's columns to the fields config lists per family."""
    for name, family in FAMILIES.items():
        assert FAMILY_FIELDS[name] == tuple(column.name for column in family.columns)
    assert FAMILY_FIELDS["multiple_choice"] == ("context", "question", "choices")


def test_config_knows_each_familys_shortest_sequence() -> None:
    """model.n_ctx is checked at load against the shortest sequence of each family: its special
    tokens and one token per text, as the family's layouts lay them out."""
    for name, family in FAMILIES.items():
        for layout in family.layouts:
            words = layout.split()
            special = sum(word in ("<start>", "<delim>", "<classify>") for word in words)
            assert FAMILY_MIN_CTX[name] == special + len(family.columns), (name, layout)


def test_config_label_rules_match_each_family() -> None:
    """Config validates `labels` by family name (it cannot import the objects): a choice
    family's tasks have none, a family with `scores` may leave them out and be a regression,
    any other needs them."""
    for family in FAMILIES.values():
        if isinstance(family, ChoiceFamily):
            assert not task(family.name, None).regression
            with pytest.raises(ValueError, match="label is the index of the answer"):
                task(family.name, ["a", "b"])
            continue
        assert not task(family.name, ["a", "b"]).regression
        if family.scores:
            assert task(family.name, None).regression
        else:
            with pytest.raises(ValueError, match="needs its labels"):
                task(family.name, None)


def test_schema_per_family() -> None:
    def names(name: str) -> list[str]:
        return family_of(TASKS[name]).schema(TASKS[name]).names

    assert names("sst2") == ["idx", "text", "label"]
    assert names("rte") == ["idx", "premise", "hypothesis", "label"]
    assert names("mrpc") == ["idx", "text_a", "text_b", "label"]
    assert names("race") == ["idx", "context", "question", "choices", "label"]
    race, mrpc, stsb = TASKS["race"], TASKS["mrpc"], TASKS["stsb"]
    assert family_of(race).schema(race).field("choices").type == pa.list_(pa.string())
    assert family_of(race).schema(race).field("label").type == pa.int64()  # the answer's index
    assert family_of(mrpc).schema(mrpc).field("label").type == pa.int64()
    assert family_of(stsb).schema(stsb).field("label").type == pa.float64()  # regression


def test_readers_fill_the_schema_columns() -> None:
    for name in ("sst2", "rte", "stsb", "race"):
        family = family_of(TASKS[name])
        columns = family.new_columns()
        assert set(columns) == set(family.schema(TASKS[name]).names) - {"idx"}
        assert all(values == [] for values in columns.values())
        columns["label"].append(0)
        assert family.new_columns()["label"] == []  # fresh lists each time


@pytest.mark.parametrize("family", FAMILIES.values(), ids=FAMILIES)
def test_layouts(family: TaskFamily) -> None:
    """`<start> ... <classify>` around the family's columns, each column once per sequence, and
    the same special tokens in every sequence (one truncation budget serves all)."""
    columns = {column.name for column in family.columns}
    for layout in family.layouts:
        words = layout.split()
        assert words[0] == START and words[-1] == CLASSIFY, layout
        texts = [w for w in words if w not in (START, DELIM, CLASSIFY)]
        assert sorted(texts) == sorted(columns), layout
    specials = {tuple(w for w in layout.split() if w not in columns) for layout in family.layouts}
    assert len(specials) == 1


def test_head_outputs() -> None:
    def n_outputs(name: str) -> int:
        return family_of(TASKS[name]).n_outputs(TASKS[name])

    assert n_outputs("sst2") == 2
    assert n_outputs("mnli") == 3
    assert n_outputs("stsb") == 1  # a score
    assert n_outputs("story_cloze") == 1  # a scalar per choice
    FAMILIES["similarity"].check_outputs(2)
    with pytest.raises(ValueError, match="a multiple-choice head has 1 output per choice, not 4"):
        FAMILIES["multiple_choice"].check_outputs(4)


def test_sequences_per_example() -> None:
    one, two = [[1, 2]], [[1, 2], [2, 1]]
    assert FAMILIES["classification"].sequences_per_example([one, one]) == 1
    assert FAMILIES["similarity"].sequences_per_example([two]) == 2
    assert FAMILIES["multiple_choice"].sequences_per_example([two + two] * 3) == 4
    with pytest.raises(ValueError, match=r"a similarity example is 2 sequence\(s\); these have "
                                         r"\[1, 2\]"):
        FAMILIES["similarity"].sequences_per_example([one, two])
    with pytest.raises(ValueError, match=r"a entailment example is 1 sequence\(s\); these have "
                                         r"\[\]"):
        FAMILIES["entailment"].sequences_per_example([])
    with pytest.raises(ValueError, match=r"the same number of choices in every example; these "
                                         r"have \[1, 2\]"):
        FAMILIES["multiple_choice"].sequences_per_example([one, two])
    with pytest.raises(ValueError, match=r"these have \[0\]"):
        FAMILIES["multiple_choice"].sequences_per_example([[]])


def test_read_out() -> None:
    """Similarity adds an example's states before the head; multiple choice gives one scalar
    per choice, an example's in one row."""
    last = torch.arange(24, dtype=torch.float32).view(6, 4)  # 6 sequences' last states, d = 4
    head = torch.nn.Linear(4, 1)
    summed = FAMILIES["similarity"].read_out(last, 2, head)
    torch.testing.assert_close(summed, head(last[0::2] + last[1::2]))
    assert FAMILIES["similarity"].output_width(1, 2) == 1
    choices = FAMILIES["multiple_choice"].read_out(last, 3, head)
    torch.testing.assert_close(choices, head(last).view(2, 3))
    assert FAMILIES["multiple_choice"].output_width(1, 3) == 3


def test_targets_and_predictions() -> None:
    entailment = task("entailment", ["a", "b", "c"])
    family = family_of(entailment)
    got = family.targets(entailment, pa.table({"label": pa.array([2, 0, 1], pa.int64())}))
    assert got.dtype == np.int64 and got.tolist() == [2, 0, 1]
    outputs = np.array([[0.1, 0.7, 0.2], [0.9, 0.0, 0.1]], np.float32)
    assert family.predictions(entailment, outputs).tolist() == [1, 0]
    stsb = task("similarity", None)
    scores = family_of(stsb).targets(stsb, pa.table({"label": pa.array([4.5, 0.0], pa.float64())}))
    assert scores.dtype == np.float32 and scores.tolist() == [4.5, 0.0]
    assert family_of(stsb).predictions(stsb, np.array([[3.5], [1.25]])).tolist() == [3.5, 1.25]
    sst2 = task("classification", ["0", "1"])
    with pytest.raises(ValueError, match="1 of 2 examples have no label"):
        family_of(sst2).targets(sst2, pa.table({"label": pa.array([1, None])}))
