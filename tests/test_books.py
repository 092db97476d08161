"""gpt1.books: Gutenberg boilerplate stripped, paragraphs unwrapped, documents grouped."""

from __future__ import annotations

from gpt1.books import paragraphs, split_documents, strip_gutenberg

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
    assert split_documents(text, 1) == ["aaaa", "bbbb", "cccc", "dddd", "eeee"]


def test_empty_text_gives_no_documents() -> None:
    assert split_documents("", 100) == []
    assert split_documents(HEADER + "\n   \n\n" + FOOTER, 100) == []


TRAILERS = (
    "End of Project Gutenberg's Alice's Adventures in Wonderland, by Lewis Carroll",
    "End of the Project Gutenberg EBook of Emma, by Jane Austen",
)


def test_end_of_ebook_trailer_is_not_prose() -> None:
    """BUG (gpt1/books.py, strip_gutenberg): real Project Gutenberg e-texts put an "End of
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
