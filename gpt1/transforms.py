"""Task-aware input transformations (paper §3.3): task text -> token-id sequences."""

from __future__ import annotations

from gpt1.bpe import Gpt1Tokenizer
from gpt1.text import TextCleaner


def classification_input(text_ids: list[int], tok: Gpt1Tokenizer, n_ctx: int) -> list[int]:
    """`<start> text <classify>`, the text cut to fit `n_ctx`."""
    return [tok.start_id, *text_ids[: n_ctx - 2], tok.classify_id]


def encode_texts(texts: list[str], tok: Gpt1Tokenizer, cleaner: TextCleaner) -> list[list[int]]:
    """Task text through the same cleaning and BPE as the pretraining corpus."""
    return tok.encode_batch([cleaner(t) for t in texts])
