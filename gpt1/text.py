"""GPT-1's text pipeline before BPE: ftfy, the paper's standardisation, spaCy tokenisation."""

from __future__ import annotations

import re
from functools import cached_property

import ftfy

_PUNCT_RUNS = re.compile(r"""(-+|~+|!+|"+|;+|\?+|\++|,+|\)+|\(+|\\+|/+|\*+|\[+|\]+|}+|{+|\|+|_+)""")
_AROUND_NEWLINE = re.compile(r"\s*\n\s*")
_SPACES = re.compile(r"[^\S\n]+")


def text_standardize(text: str) -> str:
    """The original GPT-1 code's `text_standardize`: unify dashes, space out punctuation runs."""
    text = text.replace("\u2014", "-").replace("\u2013", "-").replace("\u2015", "-")  # dashes
    text = text.replace("\u2026", "...").replace("\u00b4", "'")  # ellipsis, acute accent
    text = _PUNCT_RUNS.sub(r" \1 ", text)
    text = _AROUND_NEWLINE.sub(" \n ", text)
    text = _SPACES.sub(" ", text)
    return text.strip()


class TextCleaner:
    """ftfy -> text_standardize -> spaCy `blank("en")` tokens joined by single spaces.

    spaCy's blank English pipeline is its rule-based tokenizer alone: no model is downloaded.
    """

    @cached_property
    def _tokenizer(self):
        import spacy

        return spacy.blank("en").tokenizer

    def tokens(self, text: str) -> list[str]:
        """The spaCy tokens of the fixed and standardised `text`, whitespace tokens dropped."""
        doc = self._tokenizer(text_standardize(ftfy.fix_text(text)))
        return [tok.text for tok in doc if not tok.is_space]

    def __call__(self, text: str) -> str:
        return " ".join(self.tokens(text))
