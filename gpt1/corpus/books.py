"""Turn a plain-text book (e.g. a Project Gutenberg e-text) into documents of running prose."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path

from gpt1.corpus.documents import write_documents
from gpt1.errors import MissingInputError, utf8_errors

log = logging.getLogger(__name__)

# Today's e-texts frame the book with "*** START OF ..." and "*** END OF ..." lines. The 1990s
# ones have no START line: their header ends with the licence, whose last line is "*END*THE SMALL
# PRINT! ...*END*", and they close with "End of [this|the] Project Gutenberg Etext of <title>"
# or the title line again, in asterisks. Either kind may put an "End of ... Project Gutenberg
# ..." line before its END marker.
_START = re.compile(r"^\*\*\* ?START OF (THIS|THE) PROJECT GUTENBERG.*$", re.MULTILINE | re.I)
_SMALL_PRINT_END = re.compile(r"^\*END\*THE SMALL PRINT!.*$", re.MULTILINE | re.I)
_END = re.compile(r"^(\*\*\* ?END OF (THIS|THE) PROJECT GUTENBERG|End of (this |the )?Project "
                  r"Gutenberg|\**(The )?Project Gutenberg Etext of).*$", re.MULTILINE | re.I)
_BLANK_LINES = re.compile(r"\n[ \t]*\n+")
# Boilerplate inside the markers: the transcriber's credit.
_BOILERPLATE = re.compile(r"^Produced by ", re.I)
# Where a paragraph too long for a document is cut: at a space after a sentence's end (closing
# quotes or a bracket may follow the stop), else at any space. Matched from a piece's start,
# each runs to just past the last such space in reach.
_SENTENCE_END = re.compile(r".*(?:(?<=[.!?])|(?<=[.!?][\"'\u201d\u2019)\]]))\s", re.S)
_SPACE = re.compile(r".*\s", re.S)
_NON_SPACE = re.compile(r"\S")


def strip_gutenberg(text: str) -> str:
    """The text between Project Gutenberg's header and licence and its closing lines (all of it
    where there are none): the last modern START marker (a few e-texts repeat it, a header
    between), else the old licence's last line."""
    starts = list(_START.finditer(text))
    start = starts[-1] if starts else _SMALL_PRINT_END.search(text)
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


def _cut(para: str, start: int, limit: int, fallback: bool) -> int | None:
    """Where the piece of `para` from `start` (not a space) ends, at most `limit` characters on:
    at the last sentence end in reach; failing that, with `fallback`, at the last space, else
    `limit` characters on; without, nowhere (None)."""
    patterns = (_SENTENCE_END, _SPACE) if fallback else (_SENTENCE_END,)
    for pattern in patterns:
        match = pattern.match(para, start + 1, start + limit + 1)
        if match:
            return match.end() - 1
    return start + limit if fallback else None


def split_documents(text: str, doc_chars: int) -> list[str]:
    """Group a book's paragraphs, in order, into documents of at least `doc_chars` characters.

    The last document takes the remainder; paragraphs stay whole and are joined by newlines. A
    paragraph longer than `doc_chars` (a whole book, where it has no blank lines) is the
    exception: it is cut into pieces that each fill a document up to `doc_chars`, and its
    remainder is grouped as a paragraph. A piece ends at a sentence end; one that starts a
    document falls back to a space, then to a hard cut, where no sentence end is in reach (a
    document already begun is closed instead).
    """
    docs: list[str] = []
    current: list[str] = []
    size = 0
    for para in paragraphs(strip_gutenberg(text)):
        if _BOILERPLATE.match(para):
            continue
        start = 0  # offsets, not slices: a book of one paragraph is cut thousands of times
        while len(para) - start > doc_chars:
            cut = _cut(para, start, doc_chars - size, fallback=not current)
            if cut is not None:
                current.append(para[start:cut].rstrip())
                start = _NON_SPACE.search(para, cut).start()  # paragraphs end in a non-space
            docs.append("\n".join(current))
            current, size = [], 0
        para = para[start:]
        current.append(para)
        size += len(para) + 1
        if size >= doc_chars:
            docs.append("\n".join(current))
            current, size = [], 0
    if current:
        docs.append("\n".join(current))
    return docs


def corpus_files(root: Path, patterns: list[str], key: str) -> list[Path]:
    """Files under `root` matching any of the glob `patterns` (params key `key`), sorted, without
    duplicates; FileNotFoundError when none does."""
    found = {p for pattern in patterns for p in root.glob(pattern) if p.is_file()}
    if not found:
        raise MissingInputError(f"no corpus file under {root} matches {key} {patterns}")
    return sorted(found)


def read_book(path: Path) -> str:
    """A text file's text; a byte that is not UTF-8 is an error naming the file and line."""
    with utf8_errors(path):
        return path.read_text(encoding="utf-8-sig")


def ingest_corpus(root: Path, patterns: list[str], doc_chars: int, out: Path) -> int:
    """One Parquet file of documents (`gpt1.corpus.documents.write_documents`) in `out` per
    corpus file under `root` matching `patterns` (`ingest.corpus`), each cut into documents of
    at most `doc_chars` characters; returns the number of documents."""
    total = 0
    for i, path in enumerate(corpus_files(root, patterns, "ingest.corpus")):
        source = path.relative_to(root).as_posix()
        docs = split_documents(read_book(path), doc_chars)
        write_documents(source, docs, out / f"{i:05d}.parquet")
        log.info("%s: %d documents, %d chars", source, len(docs), sum(map(len, docs)))
        total += len(docs)
    return total
