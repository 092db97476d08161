"""Where a training step's time goes, from `torch.profiler`: each op's own (self) time put in
one of a few categories, so that two implementations of the same step can be compared side by
side (`bench.train_step --profile`).

An op's category is that of the region it runs in where that region is the data, the optimizer
(the `record_function` labels `data` and `optimizer` of our loop and the benchmark's reference
loop, and PyTorch's own `Optimizer.*` labels; our dropout's numpy masks are labelled
`dropout mask`); elsewhere that of the innermost op or autograd
node, counting outwards, whose name says what it is (an `exp_` inside our chunked loss is the
loss, a matmul inside it a matmul). Time outside any op (Python, numpy; on CUDA, time the GPU
is idle) is its own row.
Element-wise multiplies and adds are put with LayerNorm, GELU and dropout: on the CPU our
dropout applies its mask as a multiply, and residual sums are adds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import torch
from torch.autograd.profiler_util import FunctionEvent
from torch.profiler import ProfilerActivity, profile

from bench.common import Table

OUTSIDE = "outside torch ops (Python, numpy; on CUDA: GPU idle)"
REGIONS = {"data": re.compile(r"data"),
           "optimizer": re.compile(r"optimizer|Optimizer\..*|_foreach_.*")}
# innermost first, in this order of precedence for one name
KINDS = {
    "matmul": re.compile(r"mm|addmm_?|matmul|linear|mv|addmv|(Mm|Addmm)Backward0"),
    "loss": re.compile(r"_LinearCrossEntropy(Backward)?|cross_entropy|_?log_softmax.*|"
                       r"nll_loss.*|(LogSoftmax|NllLoss)Backward0"),
    "attention": re.compile(r"bmm|baddbmm|_?softmax|_softmax_backward_data|masked_fill_?|triu_?|"
                            r"_?scaled_dot_product.*|(Bmm|Baddbmm|Softmax|MaskedFill)Backward0|"
                            r"ScaledDotProduct.*Backward0"),
    "LayerNorm/GELU/dropout/element-wise": re.compile(
        r"(native_)?layer_norm.*|gelu.*|(native_)?dropout.*|dropout mask|bernoulli_?|mul_?|add_?|"
        r"div_?|sub_?|rsub|tanh|pow|(NativeLayerNorm|Gelu|NativeDropout|Mul|Add|Div|Sub|Rsub|Tanh|Pow)"
        r"Backward0"),
}
CATEGORIES = [*REGIONS, *KINDS, "other ops", OUTSIDE]
TOP_OPS = 30  # rows of a side's costliest ops (`top_ops`)


def _bare(name: str) -> str:
    return name.removeprefix("autograd::engine::evaluate_function: ").removeprefix("aten::")


def _chain(event: FunctionEvent) -> list[str]:
    """The bare names of `event` and its enclosing events, innermost first."""
    names = []
    while event is not None:
        names.append(_bare(event.name))
        event = event.cpu_parent
    return names


def category(event: FunctionEvent) -> str:
    names = _chain(event)
    for region, pattern in REGIONS.items():
        if any(pattern.fullmatch(n) for n in names):
            return region
    for name in names:
        for kind, pattern in KINDS.items():
            if pattern.fullmatch(name):
                return kind
    return "other ops"


def step_profiler(device: torch.device) -> AbstractContextManager:
    """A profiler of the CPU (and the GPU, on CUDA); `start()` and `stop()` it around steps."""
    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    return profile(activities=activities)


def breakdown(events: Iterable[FunctionEvent], wall_seconds: float, steps: int,
              device: torch.device) -> dict[str, float]:
    """Milliseconds per step in each of CATEGORIES (on CUDA, of GPU time) over `steps` profiled
    steps that took `wall_seconds`; OUTSIDE is the rest of the wall time."""
    ms = dict.fromkeys(CATEGORIES, 0.0)
    for event in events:
        own = (event.self_device_time_total if device.type == "cuda"
               else event.self_cpu_time_total)
        ms[category(event)] += own / 1e3 / steps
    ms[OUTSIDE] = max(0.0, wall_seconds * 1e3 / steps - sum(ms.values()))
    return ms


def breakdown_table(title: str, by_side: dict[str, dict[str, float]]) -> Table:
    """Each side's milliseconds per step (`breakdown`'s) in each category and their share, and
    the whole step's."""
    table = Table(title, ["category", *(f"{name} {unit}" for name in by_side
                                        for unit in ("ms", "%"))])
    for cat in CATEGORIES:
        row: dict[str, object] = {"category": cat}
        for name, ms in by_side.items():
            row |= {f"{name} ms": ms[cat], f"{name} %": 100 * ms[cat] / sum(ms.values())}
        table.add(**row)
    table.add(category="step", **{f"{name} ms": sum(ms.values()) for name, ms in by_side.items()})
    return table


def top_ops(profiler: profile, device: torch.device) -> str:
    """The `TOP_OPS` ops costliest in their own time, as torch.profiler prints them; on CUDA,
    kernels among them, first by GPU time, then by host time (what dispatching and launching
    them costs the CPU: where the GPU waits between kernels, the second table says on what)."""
    averages = profiler.key_averages()
    if device.type != "cuda":
        return averages.table(sort_by="self_cpu_time_total", row_limit=TOP_OPS,
                              max_name_column_width=80)
    return "\n".join(f"by self {title} time:\n" + averages.table(
        sort_by=f"self_{key}_time_total", row_limit=TOP_OPS, max_name_column_width=80)
        for title, key in (("GPU", "device"), ("host", "cpu")))


def shortened(text: str, rows: int) -> str:
    """`top_ops`' text with each of its tables cut to its first `rows` rows (headers and
    totals kept)."""
    kept, rules, row = [], 0, 0
    for line in text.splitlines():
        if line.startswith("by self "):
            rules = 0
        elif line.startswith("---"):
            rules, row = rules + 1, 0
        elif rules == 2:  # between the header's rule and the closing one
            row += 1
            if row > rows:
                continue
        kept.append(line)
    return "\n".join(kept)


# a result's profile figures: its ms per step by category, and its top_ops text
PROFILED = (("training step", "profile_ms_per_step", "profile_top_ops"),
            ("eval batch", "profile_eval_ms", "profile_eval_top_ops"))


def _sides(ms: dict[str, Any], ops: dict[str, Any],
           where: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], dict, str]]:
    """(task and side, ms by category, top ops) of `bench.train_step`'s figures (by side) or
    `bench.finetune_transformers`' (by task, then side)."""
    for name, text in ops.items():
        if isinstance(text, dict):
            yield from _sides(ms[name], text, (*where, name))
        else:
            yield (*where, name), ms[name], text


def summary(settings: dict[str, Any], rows: int) -> str:
    """Each profiled side's milliseconds per step (or eval batch) and its GPU's idle share
    (time outside torch ops), then its costliest ops, `rows` of each table."""
    parts = []
    for what, ms_key, ops_key in PROFILED:
        for where, ms, text in _sides(settings.get(ms_key, {}), settings.get(ops_key, {})):
            total = sum(ms.values())
            parts.append(f"== {', '.join(where)}: {what} {total:.2f} ms, of which "
                         f"{ms[OUTSIDE]:.2f} ms {OUTSIDE}\n{shortened(text, rows)}")
    return "\n\n".join(parts)

