"""Task-aware input transformations (paper §3.3): a task's table -> token-id sequences.

Each example becomes the sequences its family lays out (`gpt1.downstream.families`, `layouts`):
its texts, cleaned and encoded like the corpus (`encode_texts`) and cut together to fit the
context (`truncate_segments`), among the special tokens `<start>`, `<delim>` and `<classify>`.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product

import numpy as np
import pyarrow as pa

from gpt1.config import TaskParams
from gpt1.corpus.text import TextCleaner
from gpt1.corpus.tokenizer import CLASSIFY, DELIM, START, GPT1Tokenizer
from gpt1.downstream.families import family_of
from gpt1.errors import InputError


def encode_texts(texts: list[str], tok: GPT1Tokenizer, cleaner: TextCleaner) -> list[list[int]]:
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
        raise InputError(f"budget {budget} < 0: n_ctx leaves no room for the special tokens")
    lengths = [len(s) for s in segments]
    if sum(lengths) <= budget:
        return [list(s) for s in segments]
    cap = _truncation_cap(lengths, budget)
    spare = budget - sum(min(n, cap) for n in lengths)
    out = []
    for seg in segments:
        if len(seg) > cap:
            seg = seg[:cap + 1] if spare > 0 else seg[:cap]
            spare -= 1
        out.append(list(seg))
    return out


def _truncation_cap(lengths: list[int], budget: int) -> int:
    """The largest length c to cut the segments to that fits: sum(min(n, c)) <= budget."""
    lo, hi = 0, max(lengths)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if sum(min(n, mid) for n in lengths) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return lo


@dataclass(frozen=True)
class Encoded:
    """A table's examples as token sequences, and how long each example's longest sequence
    would be uncut: those longer than the context lost the tokens past it."""

    examples: list[list[list[int]]]
    lengths: np.ndarray  # per example, in tokens, special tokens included


def encode_examples(task: TaskParams, table: pa.Table, tok: GPT1Tokenizer, cleaner: TextCleaner,
                    n_ctx: int) -> Encoded:
    """Every example's token sequences, each <= `n_ctx`, as the task's family lays them out
    (`TaskFamily.layouts`): the example's texts, cut together to fit (`truncate_segments`),
    among the special tokens. An example with a list of candidates is read once per candidate."""
    family = family_of(task)
    special = {START: tok.start_id, DELIM: tok.delim_id, CLASSIFY: tok.classify_id}
    layouts = [layout.split() for layout in family.layouts]
    n_special = sum(word in special for word in layouts[0])
    names = [column.name for column in family.columns]
    is_list = [pa.types.is_list(table.column(name).type) for name in names]
    columns = [_encode_column(table.column(name), tok, cleaner) for name in names]
    examples, lengths = [], []
    for values in zip(*columns, strict=True):
        sequences, longest = [], 0
        # one reading of the example per candidate, the candidate in its list's place
        for reading in product(*(v if many else [v] for v, many in zip(values, is_list,
                                                                         strict=True))):
            longest = max(longest, n_special + sum(map(len, reading)))
            cut = dict(zip(names, truncate_segments(list(reading), n_ctx - n_special),
                           strict=True))
            sequences.extend([token for word in layout
                              for token in ([special[word]] if word in special else cut[word])]
                             for layout in layouts)
        examples.append(sequences)
        lengths.append(longest)
    return Encoded(examples, np.array(lengths, dtype=np.int64))


def _encode_column(column: pa.ChunkedArray, tok: GPT1Tokenizer,
                   cleaner: TextCleaner) -> list[list[int]] | list[list[list[int]]]:
    """A column's texts encoded (`encode_texts`): per row the text's ids, or for a list column
    the ids of each text of the row's list."""
    values = column.to_pylist()
    if not pa.types.is_list(column.type):
        return encode_texts(values, tok, cleaner)
    flat = iter(encode_texts([text for texts in values for text in texts], tok, cleaner))
    return [[next(flat) for _ in texts] for texts in values]
