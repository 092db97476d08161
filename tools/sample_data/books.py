"""The books of the corpus (`data/books.json`): their titles, towns, themes and casts."""

from __future__ import annotations

from dataclasses import dataclass

from tools.sample_data.vocabulary import load


@dataclass(frozen=True)
class Character:
    """A person of a book's cast."""

    name: str
    gender: str  # "f" or "m"

    @property
    def subject(self) -> str:
        return "she" if self.gender == "f" else "he"

    @property
    def possessive(self) -> str:
        return "her" if self.gender == "f" else "his"


@dataclass(frozen=True)
class BookSpec:
    """What one book is about and how it is typeset."""

    slug: str
    title: str
    author: str
    town: str
    theme: str  # a key of THEME_PLACES (data/world.json: theme_places)
    cast: tuple[Character, ...]
    chapters: int
    film_share: float  # chance that a block of a chapter is about a film
    typographic: bool = False  # curly quotes and apostrophes instead of straight ones
    italic_titles: bool = False  # film titles as _Title_, the Gutenberg way of marking italics


def cast(*people: str) -> tuple[Character, ...]:
    """Characters from "Name/g" strings, g being f or m."""
    return tuple(Character(*person.split("/")) for person in people)


def load_books() -> tuple[BookSpec, ...]:
    """Every book of `data/books.json`, in order (the order numbers the corpus files)."""
    return tuple(BookSpec(**{**book, "cast": cast(*book["cast"])})
                 for book in load("books")["books"])


BOOKS = load_books()
