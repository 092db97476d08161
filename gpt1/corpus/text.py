"""GPT-1's text pipeline before BPE: ftfy, the paper's standardisation, spaCy tokenisation."""

from __future__ import annotations

import re
from functools import cached_property
from itertools import pairwise

import ftfy
import numpy as np

# The original code's alternation `(-+|~+|!+|...)`, written as "a run of one character of the
# set": the same matches (each alternative was a run of one character), faster in `re`.
# Measured: bench/results/findings.md ("Text cleaning: punctuation runs as one character class").
# No backslash: the original writes its pattern as a plain (not raw) string, in which `\\+`
# is `\+`, a literal plus, so it never splits a backslash off (`a\b` stays one word).
_PUNCT_RUNS = re.compile(r"""(([-~!";?+,)(/*\[\]{}|_])\2*)""")
# Cached spaCy results are dropped past this many distinct spans, bounding a worker's memory.
_MAX_CACHED_SPANS = 1 << 19
# The span between two lines of standardised text: spaCy makes it a whitespace token of its own.
_LINE_BREAK = {"\n": "\n"}
# Text to which ftfy does nothing but straighten curly quotes: ASCII other than the characters
# an ftfy fix acts on ('&' for HTML entities, '\r' for line breaks, ESC for terminal escapes, the
# other control characters), plus curly quotes and en and em dashes, the non-ASCII of most books.
# No encoding fix acts on it: each single-byte encoding ftfy tries lacks those four characters,
# or encodes them as bytes no UTF-8 sequence starts with (0x91-0x97), or as bytes that start one
# no byte of the text continues (MacRoman's 0xD0-0xD5); none is a first character of the
# mojibake ftfy looks for. Its other fixes act on other characters, and all of these are NFC.
_FTFY_AT_WORK = re.compile(
    r"[&\x00-\x08\x0b-\x1f\x7f]|[^\x00-\x7f\u2013\u2014\u2018\u2019\u201c\u201d]")
_UNCURL = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})
_FTFY_CONFIG = ftfy.TextFixerConfig(explain=False)  # `ftfy.fix_text`'s


def _straightened(text: str) -> str | None:
    """`ftfy.fix_text(text)` where all it provably does is straighten curly quotes; else None."""
    if _FTFY_AT_WORK.search(text):
        return None
    return text if text.isascii() else text.translate(_UNCURL)


def fix_text(text: str) -> str:
    """`ftfy.fix_text`, skipped where it provably does no more than straighten curly quotes: on
    such text, and on such lines of other text. Books are mostly such text, and ftfy a large
    share of cleaning. Measured: bench/results/findings.md ("Text cleaning: ftfy skipped on
    plain ASCII").

    `ftfy.fix_text`'s loop, restated: it fixes a text one segment at a time (a line with its
    newline, or `max_decode_length` characters of one), each on its own but for one setting it
    carries along: from the first segment holding "<" on, HTML entities are no longer unescaped.
    """
    fixed = _straightened(text)
    if fixed is not None:
        return fixed
    config, out, pos = _FTFY_CONFIG, [], 0
    while pos < len(text):
        end = min(text.find("\n", pos) + 1 or len(text), pos + config.max_decode_length)
        segment = text[pos:end]
        if config.unescape_html == "auto" and "<" in segment:
            config = config._replace(unescape_html=False)
        fixed = _straightened(segment)
        out.append(ftfy.fix_and_explain(segment, config).text if fixed is None else fixed)
        pos = end
    return "".join(out)


def text_standardize(text: str) -> str:
    """The original GPT-1 code's `text_standardize`: unify dashes, space out punctuation runs,
    whitespace runs holding a newline become " \n ", other whitespace runs one space, ends
    stripped. Written with `split` and `join` in place of its `re.sub` calls, which spend most of
    their time building each replacement in Python: the same output, faster.
    Measured: bench/results/findings.md ("Text cleaning: text_standardize with split and
    join")."""
    text = text.replace("\u2014", "-").replace("\u2013", "-").replace("\u2015", "-")  # dashes
    text = text.replace("\u2026", "...").replace("\u00b4", "'")  # ellipsis, acute accent
    parts = _PUNCT_RUNS.split(text)
    del parts[2::3]  # the split returns each run's character too: keep text, run, text, ...
    text = " ".join(parts)  # a space either side of every run, as `sub(r" \1 ")`
    lines = (" ".join(line.split()) for line in text.split("\n"))
    return " \n ".join(line for line in lines if line)


class TextCleaner:
    """ftfy -> text_standardize -> spaCy `blank("en")` tokens joined by single spaces.

    spaCy's blank English pipeline is its rule-based tokenizer alone: no model is downloaded.

    Books repeat the same words over and over, so each distinct whitespace-free span is given to
    spaCy once and its tokens are cached. This is exact, not an approximation: spaCy splits text
    at whitespace and tokenises each span on its own; the one thing that looks across spans is
    its special-case matcher, which matches token sequences. Adjacent words whose boundary could
    fall inside a special case (their last and first characters are adjacent across a token
    boundary of some special case's pattern) are kept together and given to spaCy as one span.
    Lines never need joining: no multi-token pattern contains a whitespace token (checked).
    """

    def __init__(self) -> None:
        self._cache: dict[str, str] = dict(_LINE_BREAK)

    @cached_property
    def _tokenizer(self):
        import spacy

        tokenizer = spacy.blank("en").tokenizer
        # Lexical attributes (shape, like_num, ...) are computed for every new word and are most
        # of spaCy's time on a new text; token texts never depend on them, and we want nothing else.
        tokenizer.vocab.lex_attr_getters = {}
        return tokenizer

    @cached_property
    def _join_pairs(self) -> np.ndarray:
        """The (last character, first character) pairs of words that spaCy must see together,
        coded `ord(last) << 21 | ord(first)` and sorted: those adjacent across a token boundary
        inside some special case's pattern. Any other boundary cannot be inside a special-case
        match."""
        from spacy.tokenizer import Tokenizer

        tok = self._tokenizer
        affixes_only = Tokenizer(tok.vocab, rules={}, prefix_search=tok.prefix_search,
                                 suffix_search=tok.suffix_search,
                                 infix_finditer=tok.infix_finditer, token_match=tok.token_match,
                                 url_match=tok.url_match)
        pairs: set[int] = set()
        for rule in tok.rules:
            pattern = [t.text for t in affixes_only(rule)]
            if len(pattern) > 1 and any(t.isspace() for t in pattern):
                raise RuntimeError(f"spaCy special case {rule!r} spans whitespace: "
                                   "TextCleaner's per-line tokenisation would not be exact")
            pairs.update(ord(a[-1]) << 21 | ord(b[0]) for a, b in pairwise(pattern))
        return np.array(sorted(pairs), dtype=np.int64)

    def tokens(self, text: str) -> list[str]:
        """The spaCy tokens of the fixed and standardised `text`, whitespace tokens dropped."""
        return self(text).split()

    def __call__(self, text: str, line_breaks: bool = False) -> str:
        """The tokens, joined by single spaces. spaCy's whitespace token between two lines is
        dropped; with `line_breaks` it is kept, as a newline, for the original
        `TextEncoder.encode` keeps it (and encodes it as `\\n</w>`)."""
        spans = self._spans(text_standardize(fix_text(text)), line_breaks)
        self._tokenize_new(spans)
        return " ".join(map(self._cache.__getitem__, spans))

    def _spans(self, text: str, line_breaks: bool) -> list[str]:
        """The spans of standardised `text` (words separated by single spaces, lines by " \n ")
        that spaCy sees separately: its words, joined across the spaces `_join_pairs` names;
        the newline between lines too where `line_breaks` says."""
        words = text.split(" ")
        # NUL at either end, so that every space has a character on each side (no pair holds NUL)
        chars = np.frombuffer(f"\0{text}\0".encode("utf-32-le", "surrogatepass"), np.uint32)
        spaces = np.flatnonzero(chars == 32)  # the k-th separates words[k] and words[k + 1]
        pairs = chars[spaces - 1].astype(np.int64) << 21 | chars[spaces + 1]
        # the sorted pairs looked up by bisection: np.isin sorts both arrays anew at every call,
        # most of this function's time on a review-sized text
        known = self._join_pairs
        at = np.minimum(np.searchsorted(known, pairs), len(known) - 1)
        joins = np.flatnonzero(known[at] == pairs)
        spans: list[str] = []
        done = 0  # words[:done] are in spans
        for k in joins.tolist():
            if k < done:  # this boundary continues the group just made
                spans[-1] += " " + words[k + 1]
            else:
                spans += words[done:k]
                spans.append(words[k] + " " + words[k + 1])
            done = k + 2
        spans += words[done:]
        if line_breaks:
            return [span for span in spans if span]
        return [span for span in spans if span and span != "\n"]

    def _tokenize_new(self, spans: list[str]) -> None:
        """Cache the tokens of the spans not seen yet, in one spaCy call: spans on separate lines
        are tokenised independently, and the newline tokens between them mark where each ends."""
        new = list(set(spans).difference(self._cache))
        if len(self._cache) + len(new) > _MAX_CACHED_SPANS:
            self._cache = dict(_LINE_BREAK)
            new = list(set(spans).difference(self._cache))
        if not new:
            return
        # words hold no whitespace, so the only whitespace tokens are the newlines between spans
        tokens = " ".join([t.text for t in self._tokenizer("\n".join(new))]).split(" \n ")
        if len(tokens) != len(new):
            raise AssertionError(f"spaCy returned {len(tokens)} spans for {len(new)}")
        self._cache.update(zip(new, tokens, strict=True))
