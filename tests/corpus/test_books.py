"""gpt1.corpus.books: Gutenberg boilerplate stripped, paragraphs unwrapped, documents grouped."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from gpt1.corpus.books import paragraphs, read_book, split_documents, strip_gutenberg

HEADER = (
    "The Project Gutenberg eBook of A Test Book\n"
    "\n"
    "This eBook is for the use of anyone anywhere in the United States.\n"
    "\n"
    "*** START OF THE PROJECT GUTENBERG EBOOK A TEST BOOK ***\n"
)
BODY = (
    "\n"
    "CHAPTER I.\n"
    "\n"
    "It was a dark and stormy night; the rain\n"
    "fell in torrents, except at occasional\n"
    "   intervals.\n"
    "\n"
    "\n"
    "   \n"
    "The second paragraph\n"
    "ends here.\n"
)
FOOTER = (
    "*** END OF THE PROJECT GUTENBERG EBOOK A TEST BOOK ***\n"
    "\n"
    "Updated editions will replace the previous one. LICENSE: PROJECT GUTENBERG TRADEMARK.\n"
)
EXPECTED = [
    "CHAPTER I.",
    "It was a dark and stormy night; the rain fell in torrents, except at occasional intervals.",
    "The second paragraph ends here.",
]


def test_strip_gutenberg_removes_header_and_licence() -> None:
    body = strip_gutenberg(HEADER + BODY + FOOTER)
    assert "START OF" not in body and "END OF" not in body
    assert "United States" not in body and "LICENSE" not in body
    assert body == "\n" + BODY


def test_strip_gutenberg_variants() -> None:
    text = "junk\n***START OF THIS PROJECT GUTENBERG EBOOK X***\nbody\n" \
           "*** end of this project gutenberg ebook x ***\nlicence\n"
    assert strip_gutenberg(text).strip() == "body"


def test_text_without_markers_is_kept_whole() -> None:
    text = "Just some text.\n\nNo markers at all *** here.\n"
    assert strip_gutenberg(text) == text
    assert split_documents(text, doc_chars=10_000) == [
        "Just some text.\nNo markers at all *** here."]


def test_paragraphs_unwrap_hard_wrapped_lines() -> None:
    assert list(paragraphs(BODY)) == EXPECTED


def test_crlf_gives_the_same_paragraphs() -> None:
    crlf = (HEADER + BODY + FOOTER).replace("\n", "\r\n")
    docs = split_documents(crlf, doc_chars=10_000)
    assert docs == ["\n".join(EXPECTED)]
    assert "\r" not in docs[0]
    assert list(paragraphs("a\rb\r\rc")) == ["a b", "c"]  # old Mac line ends too


def test_full_book_to_one_document() -> None:
    assert split_documents(HEADER + BODY + FOOTER, doc_chars=10_000) == ["\n".join(EXPECTED)]


def test_documents_group_whole_paragraphs_in_order() -> None:
    paras = [f"paragraph {i:03d} " + "x" * (1 + i % 7) for i in range(40)]
    text = "\n\n".join(paras)
    doc_chars = 60
    docs = split_documents(text, doc_chars)
    assert len(docs) > 3
    # every paragraph appears once, whole, in order
    assert [p for d in docs for p in d.split("\n")] == paras
    for doc in docs[:-1]:  # each full document reached the size; the last takes the remainder
        parts = doc.split("\n")
        size = sum(len(p) + 1 for p in parts)
        assert size >= doc_chars
        assert size - (len(parts[-1]) + 1) < doc_chars  # and stopped as soon as it did
    assert docs[-1]


def test_documents_exact_grouping() -> None:
    text = "aaaa\n\nbbbb\n\ncccc\n\ndddd\n\neeee"  # 5 chars each with the separator
    assert split_documents(text, 10) == ["aaaa\nbbbb", "cccc\ndddd", "eeee"]
    assert split_documents(text, 4) == ["aaaa", "bbbb", "cccc", "dddd", "eeee"]


def test_empty_text_gives_no_documents() -> None:
    assert split_documents("", 100) == []
    assert split_documents(HEADER + "\n   \n\n" + FOOTER, 100) == []


TRAILERS = (
    "End of Project Gutenberg's Alice's Adventures in Wonderland, by Lewis Carroll",
    "End of the Project Gutenberg EBook of Emma, by Jane Austen",
)


def test_end_of_ebook_trailer_is_not_prose() -> None:
    """BUG (gpt1/corpus/books.py, strip_gutenberg): real Project Gutenberg e-texts put an "End of
    [the] Project Gutenberg['s] EBook of <title>, by <author>" line just before the `*** END OF
    ...` marker (layout copied from pg11 lines 3370-3378 and pg158 lines 16271-16274). That
    line is boilerplate, not prose, yet it ends the last document of 15 of the 16 books in
    ../shared/data/corpus/books, so it goes into the pretraining corpus."""
    kept = {}
    for trailer in TRAILERS:
        book = ("*** START OF THIS PROJECT GUTENBERG EBOOK X ***\r\n\r\n"
                "              THE END\r\n\r\n\r\n\r\n\r\n\r\n"
                f"{trailer}\r\n\r\n"
                "*** END OF THIS PROJECT GUTENBERG EBOOK X ***\r\n\r\n"
                "***** This file should be named 11.txt or 11.zip *****\r\n")
        docs = split_documents(book, doc_chars=10_000)
        if docs != ["THE END"]:
            kept[trailer] = docs
    assert not kept, f"Gutenberg end-of-ebook trailer kept as prose: {kept}"


# -- paragraphs longer than a document ----------------------------------------------------------


def _words(docs: list[str]) -> list[str]:
    return " ".join(docs).split()


def test_book_without_blank_lines_is_cut_at_sentence_ends() -> None:
    sentences = [f"Sentence {i} says {'so ' * (i % 9)}much." for i in range(3000)]
    book = "\n".join(sentences)  # hard-wrapped, no blank line: one paragraph
    docs = split_documents(book, doc_chars=2000)
    assert len(docs) >= len(book) // 2000
    assert all(len(doc) <= 2000 for doc in docs)
    assert all(len(doc) > 1800 for doc in docs[:-1])  # each filled up to a sentence of the limit
    assert all(doc.endswith("much.") for doc in docs)
    assert _words(docs) == book.split()  # nothing lost or reordered


def test_long_paragraph_fills_the_document_begun_before_it() -> None:
    long = " ".join(f"Sentence {i} is here." for i in range(100))  # 2,190 chars
    docs = split_documents(f"CHAPTER I.\n\n{long}\n\nThe end.", doc_chars=1000)
    assert docs[0].startswith("CHAPTER I.\nSentence 0 is here.")
    assert all(len(doc) <= 1000 for doc in docs)
    assert docs[-1].endswith("Sentence 99 is here.\nThe end.")
    assert _words(docs) == f"CHAPTER I. {long} The end.".split()


def test_closing_quotes_and_brackets_end_a_sentence() -> None:
    for sentence, end in (('"Go on, go on."', '."'), ("(She went away.)", ".)"),
                          ("'Really, now?'", "?'"), ("\u201cYes, yes!\u201d", "!\u201d")):
        docs = split_documents(" ".join([sentence] * 20), doc_chars=55)
        assert all(len(doc) <= 55 and doc.endswith(end) for doc in docs), docs


def test_without_sentence_ends_the_cut_falls_back_to_spaces_then_a_hard_cut() -> None:
    words = "word " * 1000
    docs = split_documents(words, doc_chars=98)
    assert all(len(doc) <= 98 for doc in docs) and all(doc.endswith("word") for doc in docs)
    assert _words(docs) == words.split()
    assert split_documents("x" * 250, doc_chars=100) == ["x" * 100, "x" * 100, "x" * 50]


def test_begun_document_is_closed_where_no_sentence_end_is_in_reach() -> None:
    # 11 characters of room are left after the first paragraph: no sentence end fits, so the
    # document is closed as it is rather than take a fragment of a sentence
    first = "A" * 87 + "."
    long = "Unpunctuated words run on and on " * 5 + "to an end."
    docs = split_documents(f"{first}\n\n{long}", doc_chars=100)
    assert docs[0] == first
    assert all(len(doc) <= 100 for doc in docs)
    assert _words(docs) == f"{first} {long}".split()


def test_real_books_give_the_documents_they_gave_before(shared_data: Path) -> None:
    """The cut applies to paragraphs longer than a document only: these books have none
    (Emma's longest is 14,695 characters), and their documents are those of the code before
    it, pinned by hash at ingest.doc_chars's default."""
    expected = {
        "pg11_alice_in_wonderland.txt":
            (8, "b3213a6e0edff98b220437991ba27f230d693ad80888270b78866e2dd30b58d8"),
        "pg158_emma.txt": (43, "67cda8ea00b04170362f902f9d16808a3b7923317613849584107e51f509dc0c"),
    }
    for name, (count, digest) in expected.items():
        text = (shared_data / "corpus" / "books" / name).read_text(encoding="utf-8-sig")
        docs = split_documents(text, doc_chars=20_000)
        assert (len(docs), hashlib.sha256("\0".join(docs).encode()).hexdigest()) == \
            (count, digest), name


# The 1990s e-texts: no START line; the licence ("small print") closes the header, and the book
# ends with an "End of this Project Gutenberg Etext" line or the title line again. Layout from
# pg2432 lines 1-290 and its last 3 lines, pg778's last line.
OLD_HEADER = (
    "The Project Gutenberg Etext of A Test Book by A. Writer\r\n"
    "*******************************************************************\r\n"
    "**Etexts Readable By Both Humans and By Computers, Since 1971**\r\n\r\n"
    "***START**THE SMALL PRINT!**FOR PUBLIC DOMAIN ETEXTS**START***\r\n"
    'Why is this "Small Print!" statement here?  You know: lawyers.\r\n\r\n'
    "*END*THE SMALL PRINT! FOR PUBLIC DOMAIN ETEXTS*Ver.04.29.93*END*\r\n\r\n\r\n"
)
OLD_TRAILERS = ("End of this Project Gutenberg Etext of A Test Book by A.\r\nWriter\r\n",
                "*Project Gutenberg Etext of A Test Book, by A. Writer*\r\n")


def test_old_small_print_header_and_trailers_are_stripped() -> None:
    for trailer in OLD_TRAILERS:
        book = OLD_HEADER + "A TEST BOOK\r\n\r\nIt begins.\r\n\r\nTHE END\r\n\r\n\r\n" + trailer
        assert split_documents(book, doc_chars=10_000) == ["A TEST BOOK\nIt begins.\nTHE END"]


def test_a_repeated_start_marker_strips_the_header_between() -> None:
    """pg148 repeats its START line with 11 lines of header between them."""
    text = ("*** START OF THIS PROJECT GUTENBERG EBOOK X ***\nTitle: X\nRelease Date: 2016\n"
            "*** START OF THIS PROJECT GUTENBERG EBOOK X ***\nbody\n"
            "*** END OF THIS PROJECT GUTENBERG EBOOK X ***\n")
    assert split_documents(text, doc_chars=10_000) == ["body"]


OLD_STYLE_BOOKS = {  # file: (its first words of prose, its last words)
    "pg2432_barchester_towers.txt": ("BARCHESTER TOWERS", "THE END"),
    "pg690_proposed_roads_to_freedom.txt": ("Scanned by Charles Keller", "Yellow races, 151, 210"),
    "pg778_five_children_and_it.txt": ("FIVE CHILDREN AND IT", "But I must say no more."),
}
# what the header, its licence and the trailers say, and no book would
LICENCE_WORDS = ("Project Gutenberg", "Small Print", "Etext", "You know: lawyers",
                 "public domain work", "Carnegie-Mellon", "Benedictine University", "royalties",
                 "LIMITED WARRANTY", "DISCLAIMER", "Hart", "promo.net")


def test_old_style_books_keep_no_licence_text(shared_data: Path) -> None:
    """The three books of ../shared/data/books whose header has no `*** START OF` line (its
    README names them): the documents run from the book's first words to its last, and no
    word of the header, the licence or the trailer is left."""
    for name, (first, last) in OLD_STYLE_BOOKS.items():
        docs = split_documents(read_book(shared_data / "books" / name), doc_chars=20_000)
        text = "\n".join(docs)
        assert text.startswith(first) and text.endswith(last), (name, text[:80], text[-80:])
        left = [word for word in LICENCE_WORDS
                if re.search(rf"\b{re.escape(word)}\b", text, re.I)]
        assert not left, f"{name}: {left}"
