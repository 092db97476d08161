"""The run report's sections on what ran and on the model: the facts of the run, the headline
results beside their baselines and the paper, pretraining, fine-tuning, held-out text, the text
the model writes, and the run's files. Every figure comes from the run's long table
(`gpt1.reporting.run`) and its aggregations (`gpt1.reporting.table`)."""

from __future__ import annotations

from statistics import fmean
from typing import Any

import polars as pl

from gpt1.config import SOURCE_TITLES, TaskParams
from gpt1.reporting.document import (
    Bullets,
    Callout,
    Facts,
    Figure,
    Gallery,
    Quote,
    Section,
    Table,
)
from gpt1.reporting.facts import REAL_DATA_COMMAND, duration
from gpt1.reporting.paper import PAPER_GLUE, PAPER_TABLE5
from gpt1.reporting.run import Run, RunFacts
from gpt1.reporting.table import cell, full_against_no_pretrain, headlines

TITLE = "gpt1 run report"


def _f(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def spread(row: dict[str, Any]) -> str:
    """A figure over seeds as "median [min, max]"; over one seed, the figure alone."""
    return cell(row["median"], row["min"], row["max"], row["n_seeds"])


def _stop(text: str) -> str:
    """`text` ending in a full stop, one only."""
    return text if text.endswith(".") else f"{text}."


# --- what ran --------------------------------------------------------------------------------

def sample_warning(facts: RunFacts) -> Callout | None:
    if not facts.sample:
        return None
    return Callout(
        f"These figures exercise the code on a small synthetic sample (`{facts.data_root}`) "
        "and say nothing about GPT-1 on real data. For real data (the books and GLUE laid out "
        f"as in docs/data.md under ../shared/data): `{REAL_DATA_COMMAND}`.")


def run_section(facts: RunFacts) -> Section:
    """Commit, preset, data, where each training computed, and each stage's wall time with the total
    (the sample's warning goes above it: `sample_warning`)."""
    commit = "not a git checkout" if facts.commit is None else facts.commit[:12] + (
        " (with uncommitted changes)" if facts.uncommitted_changes else "")
    stages = facts.stages
    total = float(stages["seconds"].sum()) if stages.height else 0.0
    others = sorted({c for c in stages["commit"].drop_nulls() if c != facts.commit})
    rows = [[r["stage"], duration(r["seconds"])] for r in stages.iter_rows(named=True)]
    finished = sorted(stages["finished"].drop_nulls())
    window = (f"; finished {finished[0][:16].replace('T', ' ')} to "
              f"{finished[-1][:16].replace('T', ' ')} UTC" if finished else "")
    blocks: list[Any] = [
        Facts([("commit", commit), ("preset", facts.preset),
               ("data", f"`{facts.data_root}`" + (" (the bundled synthetic sample)"
                                                   if facts.sample else "")),
               *facts.trained,
               ("wall time", f"{duration(total)} over {stages.height} stages (the report's own "
                             f"not counted){window}"),
               ("report built", facts.built)])]
    if others:
        blocks.append(f"Some stages last ran at another commit ({', '.join(c[:12] for c in others)}"
                      "): DVC re-runs a stage when its inputs change, not when the commit does.")
    if rows:
        blocks.append(Table(["stage", "wall time"], rows, left=1,
                            caption=f"Stage wall times (total {duration(total)})", split=3))
    else:
        blocks.append("No stage records (metrics/stages/): the stages ran outside `dvc repro`.")
    return Section("run", "What ran", blocks)


# --- headline --------------------------------------------------------------------------------

def headline_rows(run: Run) -> list[list[str]]:
    """The results a reader comes for, each beside its baseline and the paper: pretraining's
    val loss against the unigram baseline, each fine-tuned task against the majority class,
    Table 5's full model against no_pretrain."""
    rows = []
    val = run.figure("pretrain", metric="loss", split="val")
    if val is not None:
        unigram = run.figure("pretrain", metric="loss", split="val", variant="unigram")
        rows.append(["pretraining val loss (nats/token)", f"{val['median']:.3f}",
                     f"unigram {_f(unigram and unigram['median'], 3)}", ""])
    heldout = run.figure("lm_eval", metric="loss", split="all")
    if heldout is not None:
        unigram = run.figure("lm_eval", metric="loss", split="all", variant="unigram")
        rows.append(["held-out text loss (nats/token)", f"{heldout['median']:.3f}",
                     "" if unigram is None else f"unigram {unigram['median']:.3f}", ""])
    for row in headlines(run.summary, run.tasks, "finetune").filter(
            pl.col("variant").is_null()).iter_rows(named=True):
        task = run.tasks[row["task"]]
        majority = run.figure("finetune", task=row["task"], metric=row["metric"],
                              split=row["split"], variant="majority",
                              train_size=row["train_size"])
        paper = task.paper.get(row["split"])
        rows.append([f"{task.title} {row['metric']} ({row['split']})", spread(row),
                     "" if majority is None else f"majority class {majority['median']:.1f}",
                     _f(paper)])
    for task, size, full, bare in full_against_no_pretrain(run):
        paper = PAPER_TABLE5["full"].get(task), PAPER_TABLE5["no_pretrain"].get(task)
        spec = run.tasks[task]
        rows.append([f"Table 5: {spec.title} {spec.metrics[0]}, {size:,} train, full model",
                     spread(full), f"no_pretrain {spread(bare)}",
                     "" if None in paper else f"{paper[0]:.1f} vs {paper[1]:.1f}"])
    return rows


def headline_table(run: Run) -> Table:
    return Table(["result", "ours (median [min, max] over seeds)", "baseline", "paper"],
                 headline_rows(run), left=1)


def headline_section(run: Run) -> Section:
    rows = headline_rows(run)
    if not rows:
        return Section("headline", "Headline results", ["Nothing to show: no stage ran."])
    return Section("headline", "Headline results", [
        headline_table(run),
        "Baselines: the unigram loss is what token frequencies alone achieve; the majority "
        "class scores every dev example as the train split's most frequent label; `no_pretrain` "
        "is the same model fine-tuned from a random initialisation (Table 5). The paper's "
        "figures (Radford et al. 2018) are mostly test-set figures on the full datasets."])


def headline_text(run: Run, facts: RunFacts, limit: int = 7) -> str:
    """The headline table as plain text for a terminal (`make pipeline` prints it): a title
    line, `limit` rows (the losses, then Table 5's full against no_pretrain, then the tasks),
    and how many more the report has."""
    table = headline_table(run)
    ranked = sorted(table.rows, key=lambda r: 0 if "loss" in r[0] else
                    1 if r[0].startswith("Table 5") else 2)
    rows = ranked[:limit]
    header = ["result", "ours", "baseline", "paper"]
    widths = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c)
              for i, c in enumerate(header)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) if i == 1 else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    total = float(facts.stages["seconds"].sum()) if facts.stages.height else 0.0
    where = "the bundled synthetic sample: figures exercise the code only" if facts.sample \
        else facts.data_root
    lines = [f"{TITLE}: preset {facts.preset.split(':')[0]}, {where}; {duration(total)}",
             line(header), line(["-" * w for w in widths]), *(line(r) for r in rows)]
    if len(table.rows) > limit:
        more = len(table.rows) - limit
        lines.append(f"(and {more} more row{'s' if more > 1 else ''} in the report)")
    return "\n".join(lines) + "\n"


# --- pretraining -----------------------------------------------------------------------------

def _imported(pretrain: dict[str, Any]) -> list[Any]:
    """The pretrained model came from elsewhere (`pretrain.source` openai or hf)."""
    return [
        f"Imported from {SOURCE_TITLES[pretrain['source']]} in `{pretrain['source_dir']}` "
        f"(pretrain.source {pretrain['source']}), not pretrained here: {pretrain['n_layer']} "
        f"layers x {pretrain['n_embd']}, {pretrain['n_head']} heads, n_ctx {pretrain['n_ctx']}, "
        f"{pretrain['vocab_size']:,} tokens (its BPE and GPT-1's 4 special tokens), "
        f"{pretrain['parameters']:,} parameters. The special tokens' rows are new, drawn from "
        "N(0, 0.02) as the original code drew them, and learned in fine-tuning."]


def _pretrain_row(run: Run, stage: str, name: str) -> list[str] | None:
    def value(metric: str, split: str | None = None, variant: str | None = None) -> float:
        row = run.figure(stage, metric=metric, split=split, variant=variant)
        return float("nan") if row is None else row["median"]

    if run.figure(stage, metric="loss", split="val") is None:
        return None
    return [name, f"{value('steps'):,.0f}", f"{value('tokens'):,.0f}",
            f"{value('parameters'):,.0f}", f"{value('loss', 'train'):.4f}",
            f"{value('loss', 'val'):.4f}", f"{value('perplexity', 'val'):.2f}",
            f"{value('loss', 'val', 'unigram'):.4f}", f"{value('tokens_per_second'):,.0f}",
            f"{100 * value('mfu'):.1f}%", duration(value('startup_seconds'))]


def pretrain_section(run: Run) -> Section:
    """The pretraining table (and the LSTM control's row), and the loss curves."""
    pretrain = run.data.pretrain
    if pretrain.get("source", "train") != "train":
        return Section("pretraining", "Pretrained model", _imported(pretrain))
    if not pretrain["run"]:
        return Section("pretraining", "Pretraining", [_stop(f"Not run: {pretrain['reason']}")])
    rows = [row for row in (_pretrain_row(run, "pretrain", "Transformer"),
                            _pretrain_row(run, "pretrain_lstm", "LSTM (Table 5's control)"))
            if row is not None]
    blocks: list[Any] = [Table(["model", "steps", "tokens", "parameters", "train loss",
                                "val loss", "val perplexity", "unigram val loss", "tokens/s",
                                "MFU", "first step"], rows)]
    if "pretraining" in run.plots:
        blocks.append(Figure(run.plots["pretraining"], "pretraining loss",
                             "Train and val loss by step (dvclive), against the unigram "
                             "baseline.", width="760px"))
    blocks.append("Losses are in nats per token. The unigram val loss is what token frequencies "
                  "alone achieve (the train split's smoothed frequencies scored on val): a val "
                  "loss well below it is what the model learned from context. Tokens/s and MFU "
                  "are the rate once started: the first step of each session (where "
                  "torch.compile compiles the step) is left out, its seconds shown apart.")
    return Section("pretraining", "Pretraining", blocks)


# --- fine-tuning -----------------------------------------------------------------------------

def glue_beside_paper(run: Run) -> tuple[list[str], float, float] | None:
    """Over the GLUE tasks fine-tuned here, the mean of our headline figure (each task's first
    metric, its median over seeds averaged over the task's dev splits) and of the paper's for the
    same tasks and splits, with the tasks' titles: like with like, as the paper's GLUE score (all
    nine tasks' test sets) is not beside a few tasks' dev sets. None where no such task ran."""
    titles, ours, paper = [], [], []
    for name, task in run.tasks.items():
        if not task.glue:
            continue
        pairs = [(row["median"], task.paper[split]) for split in task.eval_splits
                 if split in task.paper
                 and (row := run.figure("finetune", name, task.metrics[0], split)) is not None]
        if pairs:
            titles.append(task.title)
            ours.append(fmean(mine for mine, _ in pairs))
            paper.append(fmean(theirs for _, theirs in pairs))
    return (titles, fmean(ours), fmean(paper)) if titles else None


def _task_rows(run: Run, name: str, task: TaskParams) -> list[list[str]]:
    rows = []
    primary, others = task.metrics[0], task.metrics[1:]
    for split in task.eval_splits:
        main = run.figure("finetune", name, primary, split)
        if main is None:
            continue
        extra = ", ".join(f"{m} {row['median']:.1f}" for m in others
                          if (row := run.figure("finetune", name, m, split)) is not None)
        majority = run.figure("finetune", name, primary, split, "majority",
                              train_size=main["train_size"])
        paper = task.paper.get(split)
        title = task.title if split == "dev" else f"{task.title} ({split})"
        if name in run.plots:
            title = f"[{title}]({run.plots[name]})"
        rows.append([title, f"{primary}{f' ({extra})' if extra else ''}",
                     f"{main['median']:.1f}", f"[{main['min']:.1f}, {main['max']:.1f}]",
                     str(main["n_seeds"]), _f(majority and majority["median"]),
                     "" if paper is None else f"{paper:.1f}", f"{main['train_size']:,}"])
    return rows


def truncation_note(run: Run) -> str | None:
    """What fine-tuning cut to fit the context, per task that ran: the examples of each split
    longer than n_ctx and their median length uncut, or that none was; None where none ran."""
    cut, whole = [], []
    for name, result in run.data.finetune.items():
        if not result["run"]:
            continue
        truncated = result["truncated"]
        splits = [f"{split} {c['cut']:,} of {c['examples']:,} (median {c['median_tokens']:,.0f} "
                  "tokens)" for split, c in truncated["splits"].items() if c["cut"]]
        if splits:
            cut.append(f"{run.tasks[name].title} (n_ctx {truncated['n_ctx']}): "
                       f"{', '.join(splits)}")
        else:
            whole.append(f"{run.tasks[name].title} (n_ctx {truncated['n_ctx']})")
    if not cut and not whole:
        return None
    told = []
    if cut:
        told.append("Examples longer than the context, cut to fit it (the texts lose their "
                    f"ends, longest first): {'; '.join(cut)}.")
    if whole:
        told.append(f"No example was cut in {', '.join(whole)}.")
    return " ".join(told)


def finetune_section(run: Run) -> Section:
    """A row per task and dev split (the median over seeds, its spread, the majority class, the
    paper's figure), in registry order, then why the others did not run; the summary chart and
    each task's curves."""
    rows = [row for name, task in run.tasks.items() if name in run.data.finetune
            for row in _task_rows(run, name, task)]
    not_run: dict[str, list[str]] = {}  # reason -> the tasks it kept from running
    for name, task in run.tasks.items():
        if (reason := run.skipped("finetune", name)) is not None:
            not_run.setdefault(reason, []).append(task.title)
    blocks: list[Any] = [Table(["task", "metric", "ours (median)", "[min, max]", "seeds",
                                "majority class", "paper", "train examples"], rows, left=2)
                         if rows else "No task was fine-tuned."]
    if (note := truncation_note(run)) is not None:
        blocks.append(note)
    if not_run:
        blocks += ["Not run (registry order):", Bullets(
            [f"{', '.join(titles)}: {reason}" for reason, titles in not_run.items()])]
    if "finetune" in run.plots:
        blocks.append(Figure(run.plots["finetune"], "fine-tuning summary",
                             "Each task's headline score: ours (median, min-max over seeds), "
                             "the majority class and the paper's.", width="900px"))
    curves = [Figure(path, f"{run.tasks[name].title} curves", run.tasks[name].title)
              for name, path in run.plots.items() if name in run.tasks]
    if curves:
        blocks.append(Gallery(curves))
    if (glue := glue_beside_paper(run)) is not None:
        titles, ours, paper = glue
        blocks.append(f"GLUE tasks fine-tuned here ({', '.join(titles)}): ours {ours:.1f} on "
                      f"average, the paper's {paper:.1f} on the same tasks (each task's figure "
                      "above, averaged over its dev splits, then over the tasks; the paper's GLUE "
                      f"score, over all nine tasks' test sets: {PAPER_GLUE}).")
    blocks += [
        "Ours: dev sets (Story Cloze: the 374 stories held out of the 2016 validation set); the "
        "paper's figures (Radford et al. 2018, Tables 2-4) are mostly test-set figures. The "
        "majority class: every dev example given the train split's most frequent label."]
    return Section("finetuning", "Fine-tuning (dev sets)", blocks)


# --- held-out text, generated text, files ------------------------------------------------------

def heldout_section(run: Run) -> Section:
    """The final model on text kept out of pretraining (metrics/lm_eval.json)."""
    lm_eval = run.data.lm_eval
    title = "Held-out text"
    if not lm_eval["run"]:
        return Section("heldout", title, [_stop(f"Not scored: {lm_eval['reason']}")])
    scored = run.results.values.filter(pl.col("stage") == "lm_eval")
    unigram = scored.filter(pl.col("variant") == "unigram").select(
        "split", pl.col("value").alias("unigram_loss"))
    figures = (scored.filter(pl.col("variant").is_null())
               .pivot(on="metric", index="split", values="value", aggregate_function="first",
                      maintain_order=True)
               .join(unigram, on="split", how="left", maintain_order="left"))
    rows = [[r["split"], f"{r['tokens']:,.0f}", f"{r['words']:,.0f}", f"{r['loss']:.4f}",
             f"{r['perplexity']:.2f}", f"{r['word_loss']:.4f}", f"{r['word_perplexity']:.2f}",
             _f(r["unigram_loss"], 4)] for r in figures.iter_rows(named=True)]
    beside = (f"the validation loss {lm_eval['val_loss']:.4f} (unigram "
              f"{lm_eval['unigram_val_loss']:.4f})" if lm_eval["val_loss"] is not None else
              "no validation loss or unigram baseline: the model was imported, and its "
              "pretraining text is not here")
    return Section("heldout", title, [
        Table(["text", "tokens", "words", "loss", "perplexity", "loss per word",
               "word perplexity", "unigram loss"], rows),
        f"Text kept out of pretraining, cleaned and encoded as the corpus is. Beside it: {beside}"
        "; per word, models with other vocabularies compare."])


def sample_section(run: Run) -> Section:
    """The short text the pretrained model wrote (stage lm_eval, seeded)."""
    title = "Text the pretrained model writes"
    generated = run.data.generated
    if generated is None:
        return Section("generated", title, ["No text: run lm_eval (it writes "
                                            f"`{run.files.generated.as_posix()}`)."])
    top_k = "all tokens" if generated["top_k"] is None else f"top_k {generated['top_k']}"
    return Section("generated", title, [
        Quote(generated["prompt_as_read"], generated["continuation"]),
        f"The prompt (bold, as the tokenizer reads it) continued by `{generated['model']}` for "
        f"{generated['tokens']} tokens: temperature {generated['temperature']}, {top_k}, seed "
        f"{generated['seed']} (params `lm_eval.sample`); the same model writes the same text."])


def files_section(run: Run, report_files: list[str]) -> Section:
    """Relative links to the run's models, predictions and metrics files."""
    files = run.files
    models = [f"[pretrained model]({run.link(files.pretrain_model)}/) "
              f"(`{files.pretrain_model.as_posix()}`)"]
    predictions = []
    for name, result in run.data.finetune.items():
        if not result["run"]:
            continue
        folder = files.finetune_models / name
        models.append(f"[{run.tasks[name].title} model]({run.link(folder)}/)")
        predictions += [f"[{run.tasks[name].title} {split}]({run.link(folder)}/"
                        f"{split}_predictions.tsv)" for split in result["eval_examples"]]
    metrics = [f"[{path.as_posix()}]({run.link(path)})" for path in
               (files.pretrain, files.lm_eval)] + [
        f"[{path.as_posix()}/]({run.link(path)}/)" for path in
        (files.finetune, files.ablation, files.transfer, files.zero_shot, files.stages)]
    return Section("files", "Files of this run", [
        Bullets([f"models: {', '.join(models)}",
                 f"dev predictions (the kept seed's): {', '.join(predictions) or 'none'}",
                 f"metrics: {', '.join(metrics)}",
                 f"this report: {', '.join(report_files)}"]),
        "Links are relative to reports/: they open where the run's outputs lie beside the "
        "report (`dvc pull` fetches them into a fresh clone)."])
