"""OpenAI's released BPE applied to raw text as the original `text_utils.TextEncoder.encode`
applies it: ftfy, `text_standardize`, spaCy tokens with line breaks kept. A module apart from
`gpt1.interop.openai` so that importing a release (stage pretrain) does not depend on the text
cleaning code."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np

from gpt1.corpus.encode import ENCODE_BATCH, WordCachedEncoder
from gpt1.corpus.shards import token_dtype
from gpt1.corpus.text import TextCleaner
from gpt1.corpus.tokenizer import GPT1Tokenizer
from gpt1.interop.openai import release_tokenizer


class OpenAITextEncoder:
    """The original `TextEncoder.encode` on raw text: ftfy, `text_standardize`, spaCy tokens
    (the whitespace token between lines included), lower-cased, then BPE, unknown pieces -> 0.

    It runs the clean and tokenize stages' path, `TextCleaner` (spaCy once per distinct span)
    then `WordCachedEncoder` (BPE once per distinct word), both exact. The original's whitespace
    token between lines is spaCy's "\\n " (newline, space), which its BPE special-cases to
    `\\n</w>`; `TextCleaner` keeps it as "\\n", which the release's BPE, splitting at spaces
    alone, encodes as the same `\\n</w>`.
    """

    def __init__(self, tokenizer: GPT1Tokenizer) -> None:
        self.tokenizer = tokenizer
        self._cleaner = TextCleaner()
        self._encoder = WordCachedEncoder(tokenizer, token_dtype(tokenizer.vocab_size))

    def words(self, text: str) -> str:
        """The lower-cased tokens the BPE is given, joined by spaces. Python's `str.lower`, as
        the original's: `tokenizers` lower-cases a word-final capital sigma to a medial one (a
        space is not case-ignorable, so lowering the joined tokens lowers each on its own)."""
        return self._cleaner(text, line_breaks=True).lower()

    def _ids(self, texts: list[str]) -> list[np.ndarray]:
        return self._encoder.encode_batch([self.words(t) for t in texts])

    def encode(self, text: str) -> list[int]:
        return self._ids([text])[0].tolist()

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        """Each text's ids, ENCODE_BATCH texts at a time (bounding the word arrays' memory)."""
        return [ids.tolist() for start in range(0, len(texts), ENCODE_BATCH)
                for ids in self._ids(texts[start:start + ENCODE_BATCH])]

    def decode(self, ids: Iterable[int]) -> str:
        return self.tokenizer.decode(ids)


def load_release_tokenizer(release_dir: Path) -> OpenAITextEncoder:
    return OpenAITextEncoder(GPT1Tokenizer(release_tokenizer(release_dir)))
