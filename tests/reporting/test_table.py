"""gpt1.reporting.run's long table (every metrics file in one polars table, aggregated over
seeds) and gpt1.reporting.table's aggregations (the pivots of Table 5 and Figure 2, the
fine-tuning figures as rows); and the metrics files' format (`dvc metrics show`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from gpt1.reporting.run import SCHEMA, collect, final_epochs, over_seeds, results
from gpt1.reporting.table import metric_rows, table5, transfer_medians, zero_shot_scores
from gpt1.training.finetune_loop import majority_class, summarise
from tests.report_fixtures import (
    FINETUNE,
    SEEDS,
    TASKS,
    ablation_file,
    accuracy,
    read_fixture_run,
    seed_runs,
)


@pytest.fixture(scope="module")
def found(tmp_path_factory: pytest.TempPathFactory):
    return results(read_fixture_run(tmp_path_factory.mktemp("run")))


def _one(frame: pl.DataFrame, **keys: object) -> dict:
    for column, value in keys.items():
        frame = frame.filter(pl.col(column).is_null() if value is None
                             else pl.col(column) == value)
    assert frame.height == 1, (keys, frame)
    return frame.row(0, named=True)


def test_one_long_table_of_every_file(found) -> None:
    values = found.values
    assert values.schema == pl.Schema(SCHEMA)
    assert set(values["stage"].unique()) == {"pretrain", "pretrain_lstm", "lm_eval", "finetune",
                                             "ablation", "transfer", "zero_shot"}
    # SST-2's file: 3 seeds x 2 epochs x (dev accuracy, train loss), and its majority class
    sst2 = values.filter((pl.col("stage") == "finetune") & (pl.col("task") == "sst2"))
    assert sst2.height == 3 * 2 * 2 + 1
    assert _one(sst2, seed=2, epoch=2, split="dev")["value"] == 78.5
    assert _one(sst2, seed=3, epoch=2, split="train")["value"] == pytest.approx(0.43)
    assert _one(sst2, variant="majority")["value"] == 50.92
    # Table 5's cells: 4 variants x 2 sizes x 3 seeds, one epoch each, accuracy and train loss
    ablation = values.filter(pl.col("stage") == "ablation")
    assert ablation.height == 4 * 2 * 3 * 2
    assert sorted(ablation["train_size"].unique()) == [1000, 67349]
    # zero-shot: each trunk at each of 5 snapshots, and the chance level, per task that ran
    assert values.filter(pl.col("stage") == "zero_shot").height == 2 * (2 * 5 + 1)
    assert _one(values, stage="zero_shot", task="sst2", variant="lstm", step=100)["value"] == 52.0
    assert _one(values, stage="pretrain", split="val", metric="loss", variant="unigram")[
        "value"] == 6.54321
    assert _one(values, stage="lm_eval", split="books/kept.txt", metric="word_loss")[
        "value"] == 4.012


def test_what_did_not_run_says_why(found) -> None:
    skipped = found.skipped
    assert _one(skipped, stage="finetune", task="rte")["reason"] == \
        "data not found at /data/glue/RTE/train.tsv"
    assert skipped.filter(pl.col("stage") == "ablation").height == 4  # story_cloze, each variant
    assert _one(skipped, stage="ablation", task="story_cloze", variant="lstm")["reason"] == \
        "data not found at /data/story_cloze.csv"
    assert _one(skipped, stage="zero_shot", task="race")["reason"].startswith("data not found")


def test_the_last_epoch_counts() -> None:
    values = pl.DataFrame([
        {"stage": "finetune", "task": "t", "seed": 1, "epoch": e, "split": "dev",
         "metric": "accuracy", "value": v} for e, v in ((1, 10.0), (2, 20.0), (3, 30.0))]
        + [{"stage": "finetune", "task": "t", "seed": 2, "epoch": 1, "split": "dev",
            "metric": "accuracy", "value": 50.0}], schema=SCHEMA)
    assert sorted(final_epochs(values)["value"]) == [30.0, 50.0]  # seed 2 ran one epoch


def test_medians_min_max_over_seeds_by_hand(found) -> None:
    summary = over_seeds(found.values)
    # SST-2 epoch 2: 80.0, 78.5, 81.25 (epoch 1's 50.0 left out)
    sst2 = _one(summary, stage="finetune", task="sst2", split="dev", metric="accuracy",
                variant=None)
    assert (sst2["median"], sst2["min"], sst2["max"]) == (80.0, 78.5, 81.25)
    assert sst2["seeds"] == SEEDS and sst2["n_seeds"] == 3
    # MRPC F1 80, 79, 81; MNLI mismatched 62, 61, 63
    mrpc = _one(summary, stage="finetune", task="mrpc", split="dev", metric="f1", variant=None)
    assert (mrpc["median"], mrpc["min"], mrpc["max"]) == (80.0, 79.0, 81.0)
    mnli = _one(summary, stage="finetune", task="mnli", split="dev_mismatched",
                metric="accuracy", variant=None)
    assert mnli["median"] == 62.0
    # no_pretrain at 1,000 examples: 58.0, 60.04, 61.0
    bare = _one(summary, stage="ablation", task="sst2", variant="no_pretrain", train_size=1000,
                metric="accuracy")
    assert (bare["median"], bare["min"], bare["max"]) == (60.04, 58.0, 61.0)
    # RTE with 3 of 4 layers: 55.25, 57.25, 58.25
    layer = _one(summary, stage="transfer", task="rte", layers=3, metric="accuracy")
    assert (layer["median"], layer["min"], layer["max"]) == (57.25, 55.25, 58.25)
    # a baseline has no seeds
    majority = _one(summary, stage="finetune", task="sst2", variant="majority")
    assert majority["median"] == 50.92 and majority["n_seeds"] == 0


def test_even_seed_counts_take_the_mean_of_the_middle_two() -> None:
    values = pl.DataFrame([{"stage": "ablation", "task": "t", "seed": s, "split": "dev",
                            "metric": "accuracy", "value": v}
                           for s, v in ((1, 70.0), (2, 60.0), (3, 90.0), (4, 61.0))],
                          schema=SCHEMA)
    row = over_seeds(values).row(0, named=True)
    assert (row["median"], row["min"], row["max"]) == (65.5, 60.0, 90.0)


def test_table5_pivot_a_row_per_variant_a_column_per_task_and_size(found) -> None:
    pivot = table5(over_seeds(found.values), TASKS)
    assert pivot.columns == ["variant", "sst2|1000", "sst2|67349"]
    assert pivot["variant"].to_list() == ["full", "no_pretrain", "no_aux", "lstm"]
    assert pivot.row(1) == ("no_pretrain", "60.0 [58.0, 61.0]", "82.0 [81.0, 83.0]")
    assert pivot.row(0)[1] == "80.1 [79.0, 81.2]"


def test_figure_2_pivots(found) -> None:
    medians = transfer_medians(over_seeds(found.values), TASKS)
    assert medians.columns == ["task", "0", "1", "2", "3", "4"]
    assert medians.row(0) == ("rte", 52.0, 53.5, 54.0, 57.25, 58.5)
    scores = zero_shot_scores(found.values)
    assert scores.columns == ["variant", "step", "sst2", "cola"]
    assert scores.height == 2 * 5
    assert scores.filter((pl.col("variant") == "gpt1") & (pl.col("step") == 100)).row(0) == (
        "gpt1", 100, 60.1, 4.0)


def test_figure_2s_ends_taken_from_table_5_are_its_runs_at_the_transfer_size() -> None:
    ablation = {variant: {"sst2": ablation_file(variant, "sst2", (500, 500, scores),
                                                (None, 2000, (90.0, 91.0, 92.0)))}
                for variant, scores in (("no_pretrain", (50.0, 52.5, 53.5)),
                                        ("full", (58.0, 59.0, 66.5)))}
    transfer = {"sst2": {"task": "sst2", "run": True, "max_train_examples": 500,
                         "train_examples": 500, "n_layer": 2,
                         "layers_0": {"k": 0, "from_ablation": "no_pretrain"},
                         "layers_1": {"k": 1, "runs": seed_runs(accuracy(51.5, 51.5, 52.0))},
                         "layers_2": {"k": 2, "from_ablation": "full"}}}
    summary = over_seeds(collect(ablation=ablation, transfer=transfer).values)
    assert transfer_medians(summary, TASKS).row(0) == ("sst2", 52.5, 51.5, 59.0)
    end = _one(summary, stage="transfer", task="sst2", layers=2, metric="accuracy")
    assert (end["min"], end["max"], end["seeds"], end["train_size"]) == (58.0, 66.5, SEEDS, 500)


def test_nothing_run_gives_empty_pivots(tmp_path: Path) -> None:
    empty = pl.DataFrame(schema=SCHEMA)
    assert table5(over_seeds(empty), TASKS).is_empty()
    assert transfer_medians(over_seeds(empty), TASKS).is_empty()
    assert zero_shot_scores(empty).is_empty()


def test_metric_rows_one_per_task_split_and_metric() -> None:
    rows = metric_rows(TASKS, collect(finetune={name: FINETUNE[name] for name in
                                                ("sst2", "mrpc", "mnli", "rte")}))
    assert [(r["task"], r["split"], r["metric"]) for r in rows] == [
        ("sst2", "dev", "accuracy"), ("mnli", "dev", "accuracy"),
        ("mnli", "dev_mismatched", "accuracy"), ("rte", None, None),
        ("mrpc", "dev", "f1"), ("mrpc", "dev", "accuracy")]
    assert rows[0] == {"task": "sst2", "split": "dev", "metric": "accuracy", "median": 80.0,
                       "min": 78.5, "max": 81.25, "seeds": 3, "majority": 50.92, "paper": 91.3,
                       "note": ""}
    assert rows[2]["paper"] == 81.4 and rows[5]["paper"] is None  # the paper's figure is F1
    assert rows[3]["note"] == "not run: data not found at /data/glue/RTE/train.tsv"
    assert rows[3]["seeds"] == 0


def test_metrics_file_keys_are_flat_for_dvc() -> None:
    # MNLI, 3 seeds: matched 60, 59, 61.5; mismatched 62, 61, 63
    by_seed = {1: {"dev": {"accuracy": 60.0}, "dev_mismatched": {"accuracy": 62.0}},
               2: {"dev": {"accuracy": 59.0}, "dev_mismatched": {"accuracy": 61.0}},
               3: {"dev": {"accuracy": 61.5}, "dev_mismatched": {"accuracy": 63.0}}}
    majority = {"dev": {"accuracy": 35.45}, "dev_mismatched": {"accuracy": 35.22}}
    assert summarise(["accuracy"], ["dev", "dev_mismatched"], by_seed, majority) == {
        "split": "dev", "accuracy": 60.0, "accuracy_min": 59.0, "accuracy_max": 61.5,
        "majority_accuracy": 35.45,
        "by_seed": {"1": {"accuracy": 60.0}, "2": {"accuracy": 59.0}, "3": {"accuracy": 61.5}},
        "dev_mismatched": {"accuracy": 62.0, "accuracy_min": 61.0, "accuracy_max": 63.0,
                           "majority_accuracy": 35.22,
                           "by_seed": {"1": {"accuracy": 62.0}, "2": {"accuracy": 61.0},
                                       "3": {"accuracy": 63.0}}}}
    # two metrics, two seeds (the median of two is their mean), no baseline (regression)
    two = summarise(["pearson", "spearman"], ["dev"],
                    {7: {"dev": {"pearson": 80.0, "spearman": 70.0}},
                     8: {"dev": {"pearson": 85.0, "spearman": 76.0}}})
    assert two == {"split": "dev", "pearson": 82.5, "pearson_min": 80.0, "pearson_max": 85.0,
                   "spearman": 73.0, "spearman_min": 70.0, "spearman_max": 76.0,
                   "by_seed": {"7": {"pearson": 80.0, "spearman": 70.0},
                               "8": {"pearson": 85.0, "spearman": 76.0}}}


def test_majority_class_is_the_most_frequent_train_label() -> None:
    assert majority_class(np.array([1, 0, 1, 2, 1, 0])) == 1
    assert majority_class(np.array([2, 2, 0, 0])) == 0  # a tie: the lowest
