"""What the report shows of the run's long table (`gpt1.reporting.run`), aggregated: each
task's headline figure, Table 5 as ours and its pairs of the full model against no_pretrain,
Figure 2's pivots, the fine-tuning figures as rows (the Prefect artifact), and a figure over
seeds as text."""

from __future__ import annotations

from typing import Any

import polars as pl

from gpt1.config import TaskParams
from gpt1.reporting.run import Results, Run


def headline_metrics(tasks: dict[str, TaskParams]) -> pl.DataFrame:
    """Each registry task's headline: the metric the paper reports (its first) on its first dev
    split."""
    return pl.DataFrame({"task": list(tasks), "metric": [t.metrics[0] for t in tasks.values()],
                         "split": [t.eval_splits[0] for t in tasks.values()]})



def headlines(summary: pl.DataFrame, tasks: dict[str, TaskParams], stage: str) -> pl.DataFrame:
    """`summary`'s rows (over_seeds) of `stage` on each task's headline metric and split."""
    return summary.filter(pl.col("stage") == stage).join(headline_metrics(tasks),
                                                         on=["task", "metric", "split"],
                                                         how="semi", maintain_order="left")



def cell(median: float, low: float, high: float, seeds: int = 2) -> str:
    """A figure over seeds as "median [min, max]", one decimal each; over one seed (or
    none: a baseline), the figure alone."""
    return f"{median:.1f}" if seeds <= 1 else f"{median:.1f} [{low:.1f}, {high:.1f}]"



def table5(summary: pl.DataFrame, tasks: dict[str, TaskParams]) -> pl.DataFrame:
    """Table 5 as ours: a row per variant that ran (in the order the summary has them), a
    column per task and train size ("median [min, max]" of the task's headline metric over
    seeds), columns named `<task>|<train_size>` in order of appearance."""
    runs = (headlines(summary, tasks, "ablation")
            .with_columns(column=pl.format("{}|{}", "task", "train_size"),
                          cell=pl.struct("median", "min", "max", "n_seeds")
                          .map_elements(lambda s: cell(s["median"], s["min"], s["max"],
                                                       s["n_seeds"]),
                                        return_dtype=pl.Utf8)))
    if runs.is_empty():
        return pl.DataFrame(schema={"variant": pl.Utf8})
    return runs.pivot(on="column", index="variant", values="cell", aggregate_function="first",
                      maintain_order=True)



def full_against_no_pretrain(run: Run) -> list[tuple[str, int, dict, dict]]:
    """Table 5's pairs where both ran: (task, train size, full's row, no_pretrain's row) of the
    task's headline metric over seeds, in the order the ablations ran."""
    rows = headlines(run.summary, run.tasks, "ablation")
    full = rows.filter(pl.col("variant") == "full")
    bare = rows.filter(pl.col("variant") == "no_pretrain")
    pairs = full.join(bare, on=["task", "train_size"], suffix="_bare", maintain_order="left")
    return [(r["task"], r["train_size"],
             {k: r[k] for k in ("median", "min", "max", "seeds", "n_seeds")},
             {k: r[f"{k}_bare"] for k in ("median", "min", "max", "seeds", "n_seeds")})
            for r in pairs.iter_rows(named=True)]



def transfer_medians(summary: pl.DataFrame, tasks: dict[str, TaskParams]) -> pl.DataFrame:
    """Figure 2 (left) as a table: a row per task, a column per number of layers transferred
    (`0`, `1`, ...), each the median over seeds of the task's headline metric."""
    rows = headlines(summary, tasks, "transfer").sort("layers", maintain_order=True)
    if rows.is_empty():
        return pl.DataFrame(schema={"task": pl.Utf8})
    return rows.pivot(on="layers", index="task", values="median", aggregate_function="first",
                      maintain_order=True)



def zero_shot_scores(values: pl.DataFrame) -> pl.DataFrame:
    """Figure 2 (right) as a table: a row per trunk and snapshot step, a column per task."""
    scores = values.filter((pl.col("stage") == "zero_shot") & pl.col("step").is_not_null())
    if scores.is_empty():
        return pl.DataFrame(schema={"variant": pl.Utf8, "step": pl.Int64})
    return scores.pivot(on="task", index=["variant", "step"], values="value",
                        aggregate_function="first", maintain_order=True)



def metric_rows(tasks: dict[str, TaskParams], found: Results) -> list[dict[str, Any]]:
    """The fine-tuning figures as table rows (the Prefect artifact `gpt1-metrics`), one per task,
    dev split and metric: median, min and max over seeds, the seeds, the majority class and the
    paper's figure; one per task that did not run, saying why. Registry order."""
    summary = found.over_seeds().filter(pl.col("stage") == "finetune")
    ours = summary.filter(pl.col("variant").is_null() & (pl.col("split") != "train"))
    majority = summary.filter(pl.col("variant") == "majority").select(
        "task", "split", "metric", pl.col("median").alias("majority"))
    papers = pl.DataFrame([(name, split, task.metrics[0], figure)
                           for name, task in tasks.items() for split, figure in task.paper.items()],
                          schema={"task": pl.Utf8, "split": pl.Utf8, "metric": pl.Utf8,
                                  "paper": pl.Float64}, orient="row")
    order = pl.DataFrame({"task": list(tasks), "order": range(len(tasks))})
    table = (ours.join(majority, on=["task", "split", "metric"], how="left")
             .join(papers, on=["task", "split", "metric"], how="left")
             .join(order, on="task")
             .with_columns(note=pl.lit(""))
             .select("order", "task", "split", "metric", "median", "min", "max",
                     pl.col("n_seeds").alias("seeds"), "majority", "paper", "note"))
    skipped = (found.skipped.filter(pl.col("stage") == "finetune").join(order, on="task")
               .select("order", "task", note=pl.format("not run: {}", "reason")))
    return (pl.concat([table, skipped], how="diagonal_relaxed")
            .with_columns(pl.col("seeds").fill_null(0))
            .sort("order", maintain_order=True).drop("order").to_dicts())
