"""Render the benchmark report: our pretraining and task figures beside the paper's."""

from __future__ import annotations

from gpt1.registry import TASKS


def render_summary(pretrain: dict, finetune: dict[str, dict]) -> str:
    """Markdown for `reports/summary.md` from the pretrain metrics and each task's metrics."""
    lines = [
        "# gpt1 benchmark report",
        "",
        "## Pretraining",
        "",
        "| steps | tokens | parameters | train loss | val loss | val perplexity "
        "| unigram val loss | tokens/s |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
        f"| {pretrain['steps']} | {pretrain['tokens']:,} | {pretrain['parameters']:,} "
        f"| {pretrain['train_loss']:.4f} | {pretrain['val_loss']:.4f} "
        f"| {pretrain['val_perplexity']:.2f} | {pretrain['unigram_val_loss']:.4f} "
        f"| {pretrain['tokens_per_second']:,.0f} |",
        "",
        "Losses are in nats per token. The unigram val loss is what token frequencies alone "
        "achieve (the train split's smoothed frequencies scored on val): a val loss well below "
        "it is what the model learned from context.",
        "",
        "## Fine-tuning (dev sets)",
        "",
        "| task | metric | ours | paper | train examples | dev examples |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for name, m in sorted(finetune.items(), key=lambda kv: list(TASKS).index(kv[0])):
        spec = TASKS[name]
        lines.append(
            f"| {spec.title} | {spec.metric} | {m['dev'][spec.metric]:.1f} "
            f"| {spec.paper_score:.1f} | {m['train_examples']:,} | {m['dev_examples']:,} |"
        )
    lines += ["", "Paper figures: Radford et al. (2018), Tables 2 and 3.", ""]
    return "\n".join(lines)
