"""gpt1.corpus.text: the original GPT-1 standardisation, and spaCy tokens after ftfy."""

from __future__ import annotations

import re

import ftfy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpt1.corpus.text import TextCleaner, fix_text, text_standardize
from reference import original_gpt1
from reference.original_gpt1 import text_standardize as original_text_standardize


@pytest.mark.parametrize(("text", "expected"), [
    ("Hello\u2014world", "Hello - world"),  # em dash
    ("1990\u20132000", "1990 - 2000"),  # en dash
    ("yes\u2015no", "yes - no"),  # horizontal bar
    ("wait\u2026", "wait..."),  # ellipsis is not spaced out (dots are not in the list)
    ("it\u00b4s", "it's"),  # acute accent becomes an apostrophe
    ("a,b;c!d?e", "a , b ; c ! d ? e"),
    ("wow!!! really??", "wow !!! really ??"),  # runs stay together
    ('say "hi"', 'say " hi "'),
    ("(a) [b] {c}", "( a ) [ b ] { c }"),
    ("a/b a*b a_b a|b a+b a~b", "a / b a * b a _ b a | b a + b a ~ b"),
    ("a\\b \\\\ c", "a\\b \\\\ c"),  # backslashes are not spaced out (see below)
    ("well---then", "well --- then"),
    ("don't stop.", "don't stop."),  # apostrophes and full stops are left to spaCy
    ("one\n\n  two", "one \n two"),  # newlines kept, collapsed, space-padded
    ("  lots \t of   space  ", "lots of space"),
    ("line\r\nbreak", "line \n break"),
])
def test_text_standardize_examples(text: str, expected: str) -> None:
    assert text_standardize(text) == expected
    assert original_text_standardize(text) == expected


@settings(max_examples=300, derandomize=True, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab .,'\"-!?;()[]{}/\\*_|+~\n\t\r \u2014\u2013"
                                              "\u2015\u2026\u00b4\u00a0\u2028\u3000\x0b\x0c\x1c\x85x")),
               max_size=40))
def test_text_standardize_matches_reference(text: str) -> None:
    assert text_standardize(text) == original_text_standardize(text)


def test_the_original_pattern_is_a_plain_string() -> None:
    """The original's punctuation pattern is a plain string literal: Python reads its `\\\\+`
    as `\\+`, so the pattern has no backslash alternative; a raw-string copy would have one."""
    as_raw = original_gpt1.PUNCTUATION_SOURCE[3:-3]  # what the source spells, read raw
    assert r"|\\+|" in as_raw and r"|\\+|" not in original_gpt1.PUNCTUATION
    assert r"|\+|" in original_gpt1.PUNCTUATION
    assert original_text_standardize("a\\b") == "a\\b"
    assert re.sub(as_raw, r" \1 ", "a\\b") == "a \\ b"  # the meaning a raw copy changes to


@pytest.fixture(scope="module")
def cleaner() -> TextCleaner:
    return TextCleaner()


def test_contractions_split_as_spacy_does(cleaner: TextCleaner) -> None:
    assert cleaner.tokens("don't") == ["do", "n't"]
    assert cleaner("I don't know, he said.") == "I do n't know , he said ."
    assert cleaner("We can't, won't.") == "We ca n't , wo n't ."


def test_cleaner_drops_newlines_and_fixes_text(cleaner: TextCleaner) -> None:
    assert cleaner("line one\n\nline two") == "line one line two"
    assert cleaner("sch\u00c3\u00b6n") == "sch\u00f6n"  # mojibake repaired by ftfy
    assert cleaner("\u201cHi,\u201d she said\u2026") == '" Hi , " she said ...'
    assert cleaner("Well\u2014I") == "Well - I"


def test_cleaner_output_is_single_spaced(cleaner: TextCleaner) -> None:
    out = cleaner("  A  messy\t\ttext \n\n with (brackets)  and  \"quotes\" ;  ")
    assert out == 'A messy text with ( brackets ) and " quotes " ;'
    assert "  " not in out and out == out.strip()
    assert cleaner("") == ""
    assert cleaner(" \n\t ") == ""


@pytest.fixture(scope="module")
def spacy_tokenizer():
    import spacy

    return spacy.blank("en").tokenizer


# Pieces that spaCy's special cases and affix rules act on, including ones whose matches could
# straddle a space (emoticons, abbreviations, clitics), so that the per-span cache is put to test.
_PIECES = ["e.g.", "a.m.", "p.m", ":)", ":-)", ":", "-", ")", "(", "'s", "n't", "can't", "o.O",
           "<3", ":D", "_", ".", "'", "\u2019", "Ltd", "Dr.", "'em", "x", "the", "US", "U.S.",
           "\u00b0C", "^_^", ";", "3", "...", "\u2014", "'cause", "goin'", "lovin", "ಠ_ಠ"]


@settings(max_examples=300, derandomize=True, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_PIECES), st.sampled_from(["", " ", "  ", "\n"])),
                max_size=12))
def test_cleaner_matches_plain_spacy(cleaner: TextCleaner, spacy_tokenizer,
                                     pieces: list[tuple[str, str]]) -> None:
    """The cached per-span tokenisation gives exactly what spaCy gives on the whole text."""
    text = "".join(piece + sep for piece, sep in pieces)
    doc = spacy_tokenizer(text_standardize(ftfy.fix_text(text)))
    assert cleaner(text) == " ".join(t.text for t in doc if not t.is_space)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=200)
       | st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126) | st.just("\n"))
       | st.sampled_from(["caf&eacute; &amp; co", "a\r\nb", "\x1b[31mred\x1b[0m", "x\x00y",
                          "plain words, and (punctuation)!", "tab\tand\nnewline"]))
def test_fix_text_is_ftfy(text: str) -> None:
    assert fix_text(text) == ftfy.fix_text(text)
