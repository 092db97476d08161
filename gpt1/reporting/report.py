"""Render the benchmark report: our pretraining and task figures beside the paper's."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from gpt1.config import SOURCE_TITLES, TaskParams

PAPER_GLUE = 72.8  # the paper's GLUE score (Table 4; test sets, nine tasks)

Result = dict[str, Any]  # a task's metrics file (metrics/finetune/<task>.json)


def _imported_section(pretrain: Result) -> list[str]:
    """The pretrained model came from elsewhere (`pretrain.source` openai or hf)."""
    return [
        "## Pretrained model",
        "",
        f"Imported from {SOURCE_TITLES[pretrain['source']]} in `{pretrain['source_dir']}` "
        f"(pretrain.source {pretrain['source']}), not pretrained here: {pretrain['n_layer']} "
        f"layers x {pretrain['n_embd']}, {pretrain['n_head']} heads, n_ctx {pretrain['n_ctx']}, "
        f"{pretrain['vocab_size']:,} tokens (its BPE and GPT-1's 4 special tokens), "
        f"{pretrain['parameters']:,} parameters. The special tokens' rows are new, drawn from "
        "N(0, 0.02) as the original code drew them, and learned in fine-tuning.",
        "",
    ]


def _pretrain_section(pretrain: Result) -> list[str]:
    if pretrain.get("source", "train") != "train":
        return _imported_section(pretrain)
    return [
        "## Pretraining",
        "",
        "| steps | tokens | parameters | train loss | val loss | val perplexity "
        "| unigram val loss | tokens/s | MFU |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        f"| {pretrain['steps']} | {pretrain['tokens']:,} | {pretrain['parameters']:,} "
        f"| {pretrain['train_loss']:.4f} | {pretrain['val_loss']:.4f} "
        f"| {pretrain['val_perplexity']:.2f} | {pretrain['unigram_val_loss']:.4f} "
        f"| {pretrain['tokens_per_second']:,.0f} | {100 * pretrain['mfu']:.1f}% |",
        "",
        "Losses are in nats per token. The unigram val loss is what token frequencies alone "
        "achieve (the train split's smoothed frequencies scored on val): a val loss well below "
        "it is what the model learned from context.",
        "",
    ]


def _heldout_section(lm_eval: Result) -> list[str]:
    """The final model on text kept out of pretraining (metrics/lm_eval.json)."""
    if not lm_eval["run"]:
        return ["## Held-out text", "", f"Not scored: {lm_eval['reason']}.", ""]
    rows = [*lm_eval["files"].items(), ("all", lm_eval["all"])]
    return [
        "## Held-out text",
        "",
        "| text | tokens | words | loss | perplexity | loss per word | word perplexity "
        "| unigram loss |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
        *(f"| {name} | {r['tokens']:,} | {r['words']:,} | {r['loss']:.4f} | "
          f"{r['perplexity']:.2f} | {r['word_loss']:.4f} | {r['word_perplexity']:.2f} | "
          f"{_loss(r['unigram_loss'])} |" for name, r in rows),
        "",
        "Text kept out of pretraining, cleaned and encoded as the corpus is. Beside it: "
        + (f"the validation loss {lm_eval['val_loss']:.4f} (unigram "
           f"{lm_eval['unigram_val_loss']:.4f})" if lm_eval["val_loss"] is not None else
           "no validation loss or unigram baseline: the model was imported, and its "
           "pretraining text is not here")
        + "; per word, models with other vocabularies compare.",
        "",
    ]


def _loss(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def _figure(summary: dict[str, float]) -> str:
    return f"{summary['median']:.1f}"


def _spread(summary: dict[str, float]) -> str:
    return f"[{summary['min']:.1f}, {summary['max']:.1f}]"


def median_spread(summary: dict[str, float]) -> str:
    """A figure over seeds as "median [min, max]", one decimal each."""
    return f"{_figure(summary)} {_spread(summary)}"


def _task_rows(name: str, task: TaskParams, result: Result, plot: str | None) -> list[str]:
    if not result["run"]:
        return [f"| {task.title} | | | not run: {result['reason']} | | | |"]
    rows = []
    for split in task.eval_splits:
        scores = result["dev"][split]
        primary = task.metrics[0]
        others = ", ".join(f"{m} {_figure(scores[m])}" for m in task.metrics[1:])
        paper = task.paper.get(split)
        title = task.title if split == "dev" else f"{task.title} ({split})"
        if plot is not None:
            title = f"[{title}]({plot})"
        rows.append(
            f"| {title} | {primary}{f' ({others})' if others else ''} "
            f"| {_figure(scores[primary])} | {_spread(scores[primary])} "
            f"| {len(result['seeds'])} | {'' if paper is None else f'{paper:.1f}'} "
            f"| {result['train_examples']:,} |"
        )
    return rows


def glue_average(tasks: dict[str, TaskParams], results: dict[str, Result]) -> float | None:
    """GLUE's way over the GLUE tasks run: each task's metrics averaged (F1 and accuracy;
    Pearson and Spearman; MNLI's matched and mismatched), then the tasks averaged."""
    per_task = []
    for name, task in tasks.items():
        result = results.get(name)
        if not task.glue or result is None or not result["run"]:
            continue
        per_task.append(statistics.fmean(result["dev"][split][m]["median"]
                                         for split in task.eval_splits for m in task.metrics))
    return statistics.fmean(per_task) if per_task else None


def render_summary(pretrain: Result, tasks: dict[str, TaskParams], results: dict[str, Result],
                   plots: dict[str, str] | None = None, lm_eval: Result | None = None,
                   sections: Sequence[str] = ()) -> str:
    """Markdown for `reports/summary.md`: pretraining, the held-out text's loss (`lm_eval`), then
    a row per task and dev split (the median over seeds, its spread, the paper's figure), in
    registry order; then the lines of further `sections`."""
    plots = plots or {}
    lines = ["# gpt1 benchmark report", "", *_pretrain_section(pretrain),
             *(_heldout_section(lm_eval) if lm_eval is not None else []),
             "## Fine-tuning (dev sets)", "",
             "| task | metric | ours (median) | [min, max] | seeds | paper | train examples |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for name, task in tasks.items():
        if name in results:
            lines += _task_rows(name, task, results[name], plots.get(name))
    average = glue_average(tasks, results)
    lines += [
        "",
        f"GLUE average over the GLUE tasks run here: "
        f"{'n/a' if average is None else f'{average:.1f}'} (paper: {PAPER_GLUE}, the GLUE "
        "test score over nine tasks). Each task's metrics are averaged, then the tasks.",
        "",
        "Ours: dev sets (Story Cloze: the 374 stories held out of the 2016 validation set); the "
        "paper's figures (Radford et al. 2018, Tables 2-4) are mostly test-set figures.",
        "",
        *sections,
    ]
    return "\n".join(lines)


def metric_rows(tasks: dict[str, TaskParams], results: dict[str, Result]) -> list[dict[str, Any]]:
    """The report's task figures as table rows, one per task, dev split and metric (one per
    task that did not run, saying why): for a table artifact or a dataframe."""
    rows: list[dict[str, Any]] = []
    for name, task in tasks.items():
        result = results.get(name)
        if result is None:
            continue
        if not result["run"]:
            rows.append({"task": name, "split": None, "metric": None, "median": None,
                         "min": None, "max": None, "seeds": 0, "paper": None,
                         "note": f"not run: {result['reason']}"})
            continue
        for split in task.eval_splits:
            for metric in task.metrics:
                summary = result["dev"][split][metric]
                paper = task.paper.get(split) if metric == task.metrics[0] else None
                rows.append({"task": name, "split": split, "metric": metric,
                             "median": summary["median"], "min": summary["min"],
                             "max": summary["max"], "seeds": len(result["seeds"]),
                             "paper": paper, "note": ""})
    return rows
