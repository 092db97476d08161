"""What the task samples share: a written file and its README line, and rows cut into splits."""

from __future__ import annotations

import collections
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

TASK_SIZES = (("train", 60), ("dev", 20), ("test", 20))
Row = tuple[str, ...]  # a task example's text fields, then its label


@dataclass(frozen=True)
class SampleFile:
    """One written file of a task sample and what the README says about it."""

    path: str  # under the sample root
    text: str
    rows: int
    labels: str  # the labels' counts, or "-" where the file has none


def unique_rows(make: Callable[[int], Row], count: int) -> list[Row]:
    """`count` rows of `make(i)` whose texts (every field but the label) never repeat."""
    rows: list[Row] = []
    seen: set[Row] = set()
    while len(rows) < count:
        row = make(len(rows))
        if row[:-1] not in seen:
            seen.add(row[:-1])
            rows.append(row)
    return rows


def cut(rng: random.Random, rows: list[Row], sizes: Sequence[tuple[str, int]],
        ) -> dict[str, list[Row]]:
    """`rows` cut in order into parts of `sizes`, each then shuffled: rows made with alternating
    labels give every part as many of each label."""
    parts, start = {}, 0
    for name, size in sizes:
        parts[name] = rows[start:start + size]
        rng.shuffle(parts[name])
        start += size
    return parts


def splits(rng: random.Random, make: Callable[[int], Row]) -> dict[str, list[Row]]:
    """Unique rows cut into the splits of TASK_SIZES."""
    return cut(rng, unique_rows(make, sum(size for _, size in TASK_SIZES)), TASK_SIZES)


def summary(labels: Sequence[str]) -> str:
    """What the README says about a file's labels: each label's count, or "-" for none."""
    counts = sorted(collections.Counter(labels).items())
    return ", ".join(f"{label}: {n}" for label, n in counts) or "-"


def score_summary(rows: Sequence[Row]) -> str:
    """What the README says about a file of similarity scores: their range and mean."""
    scores = [float(row[-1]) for row in rows]
    return (f"scores {min(scores):.2f} to {max(scores):.2f}, mean "
            f"{sum(scores) / len(scores):.2f}")


def tsv_file(path: str, header: Sequence[str] | None, body: Sequence[Sequence[object]],
             labels: str = "-", bom: str = "") -> SampleFile:
    """A tab-separated file (no quoting, LF line ends) of `body` under `header`, if any."""
    lines = [header, *body] if header else body
    text = bom + "".join("\t".join(map(str, line)) + "\n" for line in lines)
    return SampleFile(path, text, len(body), labels)
