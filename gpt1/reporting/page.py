"""The run report's page: its PNGs (`write_plots`), its sections in order (`sections`: those of
`gpt1.reporting.sections` and `gpt1.reporting.analysis`), rendered as markdown
(`reports/summary.md`) and as the self-contained `reports/index.html`, all from one `Run`
(`gpt1.reporting.run`). `gpt1.jobs.report` reads the run's files and writes them."""

from __future__ import annotations

import html
from pathlib import Path

import polars as pl

from gpt1.config import Params
from gpt1.reporting.analysis import (
    VARIANT_NAMES,
    analysis_sections,
    table5_bars,
    transfer_curves,
    zero_shot_curves,
)
from gpt1.reporting.document import (
    Section,
    html_block,
    html_section,
    markdown,
)
from gpt1.reporting.plots import (
    plot_finetune,
    plot_pretraining,
    plot_table5,
    plot_task_curves,
    plot_transfer,
    plot_zero_shot,
)
from gpt1.reporting.run import Run, RunFacts
from gpt1.reporting.sections import (
    TITLE,
    files_section,
    finetune_section,
    headline_section,
    heldout_section,
    pretrain_section,
    run_section,
    sample_section,
    sample_warning,
)
from gpt1.reporting.table import headlines

SUBTITLE = "GPT-1 (Radford et al. 2018) rebuilt as a DVC + Prefect pipeline"


def write_plots(run: Run, variants: list[str], folder: Path, prefix: str) -> dict[str, str]:
    """Every PNG the report shows into `folder`, where there is something to draw; returns
    name -> its path as the report links it (`prefix` + file name)."""
    written: dict[str, str] = {}

    def done(name: str) -> Path:
        written[name] = f"{prefix}{name}.png"
        return folder / f"{name}.png"

    curves = run.data.curves
    if curves.height:
        series = {split: list(curves.filter(pl.col("split") == split)
                              .select("step", "loss").iter_rows())
                  for split in ("train", "val")}
        unigram = run.figure("pretrain", metric="loss", split="val", variant="unigram")
        plot_pretraining(series["train"], series["val"],
                         None if unigram is None else unigram["median"], done("pretraining"))
    finetuned = headlines(run.summary, run.tasks, "finetune")
    bars: dict[str, dict] = {}
    for row in finetuned.filter(pl.col("variant").is_null()).iter_rows(named=True):
        task = run.tasks[row["task"]]
        group = bars.setdefault(f"{task.title}\n{row['metric']}", {})
        group["ours"] = (row["median"], row["min"], row["max"])
        majority = run.figure("finetune", row["task"], row["metric"], row["split"], "majority",
                              train_size=row["train_size"])
        if majority is not None:
            group["majority class"] = majority["median"]
        if (paper := task.paper.get(row["split"])) is not None:
            group["paper"] = paper
    if bars:
        plot_finetune(bars, done("finetune"))
    per_epoch = run.results.values.filter((pl.col("stage") == "finetune")
                                          & pl.col("epoch").is_not_null())
    for name, task in run.tasks.items():
        rows = per_epoch.filter(pl.col("task") == name)
        if rows.is_empty() or rows["epoch"].max() < 2:  # one epoch: no curve to draw
            continue
        metric, split = task.metrics[0], task.eval_splits[0]

        def by_seed(frame: pl.DataFrame) -> dict[int, list[tuple[int, float]]]:
            return {seed: list(g.sort("epoch").select("epoch", "value").iter_rows())
                    for (seed,), g in frame.group_by("seed", maintain_order=True)}

        plot_task_curves(task.title, metric,
                         by_seed(rows.filter((pl.col("split") == split)
                                             & (pl.col("metric") == metric))),
                         by_seed(rows.filter((pl.col("split") == "train")
                                             & (pl.col("metric") == "loss"))), done(name))
    ours, paper = table5_bars(run, variants)
    if ours:
        plot_table5(ours, paper, [VARIANT_NAMES[v] for v in variants], done("table5"))
    if transfer := transfer_curves(run):
        plot_transfer(transfer, done("transfer"))
    normalised, above_chance = zero_shot_curves(run)
    if any(above_chance.values()):
        plot_zero_shot(normalised, above_chance, done("zero_shot"))
    return written


def sections(run: Run, params: Params, facts: RunFacts, report_files: list[str]) -> list[Section]:
    """Every section, in the order the page shows them."""
    analysis = params.analysis
    return [run_section(facts), headline_section(run), pretrain_section(run),
            finetune_section(run),
            *analysis_sections(run, list(analysis.ablation.variants),
                               list(analysis.ablation.tasks), list(analysis.transfer.tasks),
                               list(analysis.zero_shot.tasks)),
            heldout_section(run), sample_section(run), files_section(run, report_files)]


def render_markdown(parts: list[Section], facts: RunFacts) -> str:
    """`reports/summary.md`: the sample's warning, where it applies, then every section."""
    warning = sample_warning(facts)
    return markdown(TITLE, parts, lead=[warning] if warning is not None else [])


CSS = """
:root { --ink: #1d2330; --muted: #5b6475; --line: #dfe3ea; --accent: #2f5fb3;
        --bg: #ffffff; --panel: #f5f7fa; --warn: #fff4d6; --warn-line: #e0b400; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--ink);
       font: 15px/1.55 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial,
             sans-serif; }
header { background: #1f2a44; color: #fff; padding: 22px 0 18px; }
header .wrap, main, nav .wrap { max-width: 1180px; margin: 0 auto; padding: 0 28px; }
header h1 { margin: 0; font-size: 26px; font-weight: 650; letter-spacing: .2px; }
header p { margin: 4px 0 0; color: #c9d3e6; font-size: 14px; }
nav { background: #f0f3f8; border-bottom: 1px solid var(--line); font-size: 13.5px;
      position: sticky; top: 0; z-index: 1; }
nav .wrap { display: flex; flex-wrap: wrap; gap: 4px 16px; padding-top: 7px;
            padding-bottom: 7px; }
nav a { color: var(--accent); text-decoration: none; }
main { padding-bottom: 48px; }
section { padding: 18px 0 8px; border-bottom: 1px solid var(--line); }
h2 { font-size: 20px; margin: 8px 0 12px; font-weight: 650; }
p { margin: 8px 0; max-width: 92ch; }
a { color: var(--accent); }
code { font: 13px/1.4 ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace;
       background: var(--panel); padding: 1px 5px; border-radius: 4px; }
.callout { background: var(--warn); border-left: 4px solid var(--warn-line);
           padding: 10px 14px; border-radius: 4px; max-width: none; font-weight: 500; }
main > .callout { margin-top: 18px; }
#run dl.facts { max-width: 980px; }
#run .tables table { flex: 1 1 0; min-width: 300px; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 4px 14px;
           margin: 6px 0 10px; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; }
.table-wrap { overflow-x: auto; margin: 10px 0 12px; }
.tables { display: flex; flex-wrap: wrap; gap: 0 24px; align-items: flex-start; }
table { border-collapse: collapse; font-size: 13.5px; font-variant-numeric: tabular-nums; }
caption { text-align: left; font-weight: 600; padding: 0 0 6px; color: var(--muted);
          font-size: 13px; }
th, td { padding: 4px 10px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { background: var(--panel); font-weight: 600; border-bottom: 2px solid #c8ceda; }
td.r, th.r { text-align: right; white-space: nowrap; }
td.l, th.l { text-align: left; }
td.note { text-align: left; color: var(--muted); font-style: italic; min-width: 16ch; }
tbody tr:nth-child(even) td { background: #fafbfd; }
figure { margin: 12px 0; }
figure img { width: 100%; height: auto; border: 1px solid var(--line); border-radius: 4px; }
figcaption { color: var(--muted); font-size: 13px; margin-top: 4px; }
.gallery { display: grid; grid-template-columns: repeat(auto-fill, minmax(520px, 1fr));
           gap: 10px 16px; }
.gallery figure { margin: 0; }
ul { margin: 6px 0 10px; padding-left: 22px; }
li { margin: 3px 0; }
blockquote.sample { margin: 10px 0; padding: 12px 16px; background: var(--panel);
                    border-left: 4px solid var(--accent); white-space: pre-wrap;
                    font: 14px/1.6 Georgia, "Times New Roman", serif; max-width: 92ch; }
footer { color: var(--muted); font-size: 12.5px; padding: 16px 0; }
"""


def render_html(parts: list[Section], facts: RunFacts, folder: Path) -> str:
    """One self-contained page: inline CSS, every PNG embedded (`folder`: where the report's
    relative PNG paths start), no script and no reference outside the run."""
    nav = "".join(f'<a href="#{html.escape(s.id)}">{html.escape(s.title)}</a>' for s in parts)
    warning = sample_warning(facts)
    banner = html_block(warning, folder) if warning is not None else ""
    body = banner + "".join(html_section(s, folder) for s in parts)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(TITLE)}</title><style>{CSS}</style></head><body>"
        f'<header><div class="wrap"><h1>{html.escape(TITLE)}</h1>'
        f"<p>{html.escape(SUBTITLE)} · built {html.escape(facts.built)}</p></div></header>"
        f'<nav><div class="wrap">{nav}</div></nav>'
        f"<main>{body}<footer>Written by the report stage (python -m tasks.report) from the "
        "run's metrics files; reports/summary.md holds the same figures as markdown.</footer>"
        "</main></body></html>\n")
