"""Task-aware input transformations (paper §3.3): a task's table -> token-id sequences.

Each example becomes the sequences its family's model reads, special tokens around the text:

- classification: `<start> text <classify>`
- entailment: `<start> premise <delim> hypothesis <classify>`
- similarity: both orders, `<start> a <delim> b <classify>` and `<start> b <delim> a <classify>`
- multiple choice: per choice, `<start> context question <delim> answer <classify>`
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from gpt1.config import TaskParams
from gpt1.corpus.bpe import Gpt1Tokenizer
from gpt1.corpus.text import TextCleaner


def encode_texts(texts: list[str], tok: Gpt1Tokenizer, cleaner: TextCleaner) -> list[list[int]]:
    """Task text through the same cleaning and BPE as the pretraining corpus."""
    # contexts repeat (a RACE article has several questions): clean and encode each text once
    unique = list(dict.fromkeys(texts))
    ids = dict(zip(unique, tok.encode_batch([cleaner(t) for t in unique]), strict=True))
    return [list(ids[t]) for t in texts]


def truncate_segments(segments: list[list[int]], budget: int) -> list[list[int]]:
    """Cut tokens off the end of the longest segment, one at a time, until all fit `budget`.

    Of equally long segments the later one is cut first (as HuggingFace's `longest_first`).
    Computed in one pass: the segments longer than a cap end at the cap, or one above it.
    """
    if budget < 0:
        raise ValueError(f"budget {budget} < 0: n_ctx leaves no room for the special tokens")
    lengths = [len(s) for s in segments]
    if sum(lengths) <= budget:
        return [list(s) for s in segments]
    cap = _cap(lengths, budget)
    spare = budget - sum(min(n, cap) for n in lengths)
    out = []
    for seg in segments:
        if len(seg) > cap:
            seg = seg[:cap + 1] if spare > 0 else seg[:cap]
            spare -= 1
        out.append(list(seg))
    return out


def _cap(lengths: list[int], budget: int) -> int:
    """The largest c with sum(min(n, c)) <= budget."""
    lo, hi = 0, max(lengths)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if sum(min(n, mid) for n in lengths) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return lo


def encode_examples(task: TaskParams, table: pa.Table, tok: Gpt1Tokenizer, cleaner: TextCleaner,
                    n_ctx: int) -> list[list[list[int]]]:
    """Every example's token sequences (1, 2 for similarity, one per choice), each <= `n_ctx`."""
    def column(name: str) -> list[list[int]]:
        return encode_texts(table.column(name).to_pylist(), tok, cleaner)

    start, delim, clf = tok.start_id, tok.delim_id, tok.classify_id
    if task.family == "classification":
        return [[[start, *text, clf]] for (text,) in _fit(n_ctx - 2, column("text"))]
    if task.family == "entailment":
        return [[[start, *p, delim, *h, clf]]
                for p, h in _fit(n_ctx - 3, column("premise"), column("hypothesis"))]
    if task.family == "similarity":
        # both orders from one truncation: the orders must hold the same tokens
        return [[[start, *a, delim, *b, clf], [start, *b, delim, *a, clf]]
                for a, b in _fit(n_ctx - 3, column("text_a"), column("text_b"))]
    choices = table.column("choices").to_pylist()
    answers = iter(encode_texts([c for cs in choices for c in cs], tok, cleaner))
    examples = []
    for context, question, cs in zip(column("context"), column("question"), choices,
                                     strict=True):
        seqs = []
        for _ in cs:
            c, q, a = truncate_segments([context, question, next(answers)], n_ctx - 3)
            seqs.append([start, *c, *q, delim, *a, clf])
        examples.append(seqs)
    return examples


def _fit(budget: int, *columns: list[list[int]]) -> Iterator[list[list[int]]]:
    """Each example's segments (one per column), truncated to `budget` tokens together."""
    for segments in zip(*columns, strict=True):
        yield truncate_segments(list(segments), budget)


def targets(task: TaskParams, table: pa.Table) -> np.ndarray:
    """The `label` column: int64 class (or answer) indices, or float32 scores (regression)."""
    labels = table.column("label")
    if labels.null_count:
        raise ValueError(f"{labels.null_count} of {len(labels)} examples have no label")
    return labels.to_numpy().astype(np.float32 if task.regression else np.int64)
