"""openai/finetune-transformer-lm's `text_utils.py`, restated for tests and benchmarks to check
ours against: `text_standardize` and `TextEncoder.encode`, with spaCy 3's blank English tokenizer
in place of spaCy 2's `spacy.load('en')` (whose tokenizer alone the original used).

Nothing here calls our code. The original writes its three patterns as plain (not raw) string
literals, and Python reads a plain literal differently: its `\\\\+` is `\\+`, a literal plus, so
the original never splits off a backslash (a raw-string copy does). They are kept below as the
original's source spells them and evaluated as Python evaluates that source.
"""

from __future__ import annotations

import ast
import json
import re
import warnings
from itertools import pairwise
from pathlib import Path

import ftfy

# The original's literals, character for character (the raw strings hold their source text).
PUNCTUATION_SOURCE = r"""'''(-+|~+|!+|"+|;+|\?+|\++|,+|\)+|\(+|\\+|\/+|\*+|\[+|\]+|}+|{+|\|+|_+)'''"""  # noqa: E501
NEWLINE_SOURCE = r"""'\s*\n\s*'"""
OTHER_SPACE_SOURCE = r"""'[^\S\n]+'"""


def python_reads(source: str) -> str:
    """The string a Python string literal's source text stands for."""
    with warnings.catch_warnings():  # `\?`, `\s`: invalid escapes, kept as written
        warnings.simplefilter("ignore")
        return ast.literal_eval(source)


PUNCTUATION = python_reads(PUNCTUATION_SOURCE)
NEWLINE = python_reads(NEWLINE_SOURCE)
OTHER_SPACE = python_reads(OTHER_SPACE_SOURCE)


def text_standardize(text: str) -> str:
    text = text.replace("\u2014", "-")
    text = text.replace("\u2013", "-")
    text = text.replace("\u2015", "-")
    text = text.replace("\u2026", "...")
    text = text.replace("\u00b4", "'")
    text = re.sub(PUNCTUATION, r" \1 ", text)
    text = re.sub(NEWLINE, " \n ", text)
    text = re.sub(OTHER_SPACE, " ", text)
    return text.strip()


def get_pairs(word: tuple[str, ...]) -> set[tuple[str, str]]:
    return set(pairwise(word))


class TextEncoder:
    """`TextEncoder(encoder_path, bpe_path)`: `encode` maps raw text to the release's token ids."""

    def __init__(self, encoder_path: Path, bpe_path: Path) -> None:
        import spacy

        self.nlp = spacy.blank("en")
        self.encoder = json.loads(Path(encoder_path).read_text(encoding="utf-8"))
        self.decoder = {v: k for k, v in self.encoder.items()}
        merges = Path(bpe_path).read_text(encoding="utf-8").split("\n")[1:-1]
        merges = [tuple(merge.split()) for merge in merges]
        self.bpe_ranks = dict(zip(merges, range(len(merges)), strict=True))
        self.cache: dict[str, str] = {}

    def bpe(self, token: str) -> str:
        word = (*token[:-1], token[-1] + "</w>")
        if token in self.cache:
            return self.cache[token]
        pairs = get_pairs(word)
        if not pairs:
            return token + "</w>"
        while True:
            bigram = min(pairs, key=lambda pair: self.bpe_ranks.get(pair, float("inf")))
            if bigram not in self.bpe_ranks:
                break
            first, second = bigram
            new_word: list[str] = []
            i = 0
            while i < len(word):
                try:
                    j = word.index(first, i)
                    new_word.extend(word[i:j])
                    i = j
                except ValueError:
                    new_word.extend(word[i:])
                    break
                if word[i] == first and i < len(word) - 1 and word[i + 1] == second:
                    new_word.append(first + second)
                    i += 2
                else:
                    new_word.append(word[i])
                    i += 1
            word = tuple(new_word)
            if len(word) == 1:
                break
            pairs = get_pairs(word)
        word = " ".join(word)
        if word == "\n  </w>":
            word = "\n</w>"
        self.cache[token] = word
        return word

    def encode(self, text: str) -> list[int]:
        text_tokens = []
        for token in self.nlp(text_standardize(ftfy.fix_text(text))):
            text_tokens.extend([self.encoder.get(t, 0)
                                for t in self.bpe(token.text.lower()).split(" ")])
        return text_tokens
