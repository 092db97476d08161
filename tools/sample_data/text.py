"""Small text helpers shared by the writers: articles, plurals, numerals, slot filling, quotes."""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence

# Characters that give text cleaning (ftfy + text_standardize) something to do. They are written
# as escapes so that the code stays ASCII.
EM_DASH = "\u2014"
EN_DASH = "\u2013"
ELLIPSIS = "\u2026"
LEFT_QUOTE = "\u201c"
RIGHT_QUOTE = "\u201d"
CURLY_APOSTROPHE = "\u2019"

_SLOT = re.compile(r"\{(\w+)\}")


def capitalize(text: str) -> str:
    """`text` with its first letter upper-cased (the rest untouched)."""
    return text[:1].upper() + text[1:]


def with_article(phrase: str) -> str:
    """`phrase` preceded by "a" or "an"."""
    return ("an " if phrase[0] in "aeiou" else "a ") + phrase


def plural(noun: str) -> str:
    """English plural of the nouns used here ("comedy" -> "comedies", "film" -> "films")."""
    if noun.endswith("y") and noun[-2:-1] not in tuple("aeiou"):
        return noun[:-1] + "ies"
    return noun + "s"


def roman(number: int) -> str:
    """Roman numeral of a positive integer below 40 (enough for chapter headings)."""
    tens, units = divmod(number, 10)
    unit_names = ("", "I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX")
    return "X" * tens + unit_names[units]


def fill(template: str, slots: dict[str, Callable[[], str]]) -> str:
    """Replace every {slot} in `template`; a slot named twice gets the same value both times."""
    chosen: dict[str, str] = {}

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in chosen:
            chosen[name] = slots[name]()
        return chosen[name]

    return _SLOT.sub(value, template)


def distinct_pair(rng: random.Random, options: Sequence[str]) -> tuple[str, str]:
    """Two different entries of `options`, drawn at random."""
    first, second = rng.sample(list(options), 2)
    return first, second


def curl_quotes(paragraph: str) -> str:
    """Typographic quotes: "..." becomes a left/right pair, apostrophes become curly."""
    out = []
    opening = True
    for char in paragraph:
        if char == '"':
            out.append(LEFT_QUOTE if opening else RIGHT_QUOTE)
            opening = not opening
        elif char == "'":
            out.append(CURLY_APOSTROPHE)
        else:
            out.append(char)
    return "".join(out)
