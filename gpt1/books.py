"""Turn a plain-text book (e.g. a Project Gutenberg e-text) into documents of running prose."""

from __future__ import annotations

import re
from collections.abc import Iterator

_START = re.compile(r"^\*\*\* ?START OF (THIS|THE) PROJECT GUTENBERG.*$", re.MULTILINE | re.I)
_END = re.compile(r"^\*\*\* ?END OF (THIS|THE) PROJECT GUTENBERG.*$", re.MULTILINE | re.I)
_BLANK_LINES = re.compile(r"\n[ \t]*\n+")
# Boilerplate paragraphs inside the markers: the transcriber's credit and the closing line.
_BOILERPLATE = re.compile(r"^(Produced by |End of (the )?Project Gutenberg)", re.I)


def strip_gutenberg(text: str) -> str:
    """The text between Project Gutenberg's START and END markers (all of it if there are none)."""
    start = _START.search(text)
    if start:
        text = text[start.end():]
    end = _END.search(text)
    if end:
        text = text[: end.start()]
    return text


def paragraphs(text: str) -> Iterator[str]:
    """Paragraphs separated by blank lines, hard-wrapped lines joined with single spaces."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    for block in _BLANK_LINES.split(text):
        para = " ".join(line.strip() for line in block.split("\n") if line.strip())
        if para:
            yield para


def split_documents(text: str, doc_chars: int) -> list[str]:
    """Group a book's paragraphs, in order, into documents of at least `doc_chars` characters.

    The last document takes the remainder; paragraphs stay whole and are joined by newlines.
    """
    docs: list[str] = []
    current: list[str] = []
    size = 0
    for para in paragraphs(strip_gutenberg(text)):
        if _BOILERPLATE.match(para):
            continue
        current.append(para)
        size += len(para) + 1
        if size >= doc_chars:
            docs.append("\n".join(current))
            current, size = [], 0
    if current:
        docs.append("\n".join(current))
    return docs
