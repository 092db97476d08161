"""OpenAI's released BPE applied to raw text as the original `text_utils.TextEncoder.encode`
applies it: ftfy, `text_standardize`, spaCy tokens with line breaks kept. A module apart from
`gpt1.interop.openai` so that importing a release (stage pretrain) does not depend on the text
cleaning code."""

from __future__ import annotations

from collections.abc import Iterable
from functools import cached_property
from pathlib import Path

import ftfy

from gpt1.corpus.bpe import GPT1Tokenizer
from gpt1.corpus.text import text_standardize
from gpt1.interop.openai import release_tokenizer


class OpenAITextEncoder:
    """The original `TextEncoder.encode` on raw text: ftfy, `text_standardize`, spaCy tokens
    (whitespace tokens included), lower-cased, then BPE, unknown pieces -> 0."""

    def __init__(self, tokenizer: GPT1Tokenizer) -> None:
        self.tokenizer = tokenizer

    @cached_property
    def _spacy(self):
        import spacy

        return spacy.blank("en").tokenizer

    def words(self, text: str) -> list[str]:
        return [tok.text.lower() for tok in self._spacy(text_standardize(ftfy.fix_text(text)))]

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(" ".join(self.words(text)))

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return self.tokenizer.encode_batch([" ".join(self.words(t)) for t in texts])

    def decode(self, ids: Iterable[int]) -> str:
        return self.tokenizer.decode(ids)


def load_release_tokenizer(release_dir: Path) -> OpenAITextEncoder:
    return OpenAITextEncoder(GPT1Tokenizer(release_tokenizer(release_dir)))


