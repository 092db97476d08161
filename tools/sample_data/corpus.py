"""The corpus: books of wrapped prose, written from each book's spec by a seeded grammar."""

from __future__ import annotations

import random
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tools.sample_data.books import BOOKS, BookSpec, Character
from tools.sample_data.text import (
    capitalize,
    curl_quotes,
    distinct_pair,
    fill,
    roman,
    with_article,
)
from tools.sample_data.vocabulary import word_groups, word_pairs, words

WRAP_WIDTH = 70
CHAPTER_CHARS = (14_000, 19_000)  # range of a chapter's length before wrapping
CONVERSATION_SHARE = 0.3  # of the blocks that are not about films; the rest are narrative

# the shared sentiment lexicon (the SST-2-style task draws on it too) and the films
POSITIVE_ADJECTIVES = words("lexicon", "positive_adjectives")
NEGATIVE_ADJECTIVES = words("lexicon", "negative_adjectives")
FILM_ASPECTS = words("lexicon", "film_aspects")
GENRES = words("lexicon", "genres")
FILM_TITLES = words("films", "titles")
FILM_ACTORS = word_pairs("films", "actors")  # (name, gender)
FILM_ROLES = words("films", "roles")
NEWSPAPERS = words("films", "newspapers")
FILM_OUTINGS = words("films", "outings")
POSITIVE_REVIEW = words("films", "positive_review")
NEGATIVE_REVIEW = words("films", "negative_review")
POSITIVE_OPINIONS = words("films", "positive_opinions")
NEGATIVE_OPINIONS = words("films", "negative_opinions")

# the story world
OBJECTS = words("world", "objects")
OBJECT_ADJECTIVES = words("world", "object_adjectives")
PLACE_ADJECTIVES = words("world", "place_adjectives")
COMMON_PLACES = words("world", "common_places")
THEME_PLACES = word_groups("world", "theme_places")
MOTION_VERBS = words("world", "motion_verbs")
DIRECTIONS = words("world", "directions")
TIMES = words("world", "times")
ADVERBS = words("world", "adverbs")
PERCEPTION_VERBS = words("world", "perception_verbs")
HANDLING_VERBS = words("world", "handling_verbs")
AFTER_HANDLING = words("world", "after_handling")
LOCATIONS = words("world", "locations")
FEELINGS = words("world", "feelings")
WEATHER = words("world", "weather")
SMELLS = words("world", "smells")
SOUNDS = words("world", "sounds")
EVENTS = words("world", "events")
DURATIONS = words("world", "durations")
WAITING_ACTIONS = words("world", "waiting_actions")
HOURS = words("world", "hours")
LIGHTS = words("world", "lights")
NARRATIVE_TEMPLATES = words("narrative", "templates")

# dialogue
GESTURES = words("dialogue", "gestures")
SPEECH_VERBS = word_groups("dialogue", "speech_verbs")  # final character -> verbs
STATEMENTS = words("dialogue", "statements")
QUESTIONS = words("dialogue", "questions")
EXCLAMATIONS = words("dialogue", "exclamations")
HESITATIONS = words("dialogue", "hesitations")
INTERRUPTIONS = words("dialogue", "interruptions")
REPLY_OPENERS = words("dialogue", "reply_openers")


@dataclass(frozen=True)
class Film:
    """A film the characters see: its title as the book prints it, its star and pronoun."""

    title: str
    star: str
    star_pronoun: str


class BookWriter:
    """Writes one book from its spec, drawing every choice from its own seeded generator."""

    def __init__(self, spec: BookSpec, rng: random.Random) -> None:
        self.spec = spec
        self.rng = rng
        self.places = THEME_PLACES[spec.theme] + COMMON_PLACES

    # -- slot values -------------------------------------------------------------------------

    def _base_slots(self) -> dict[str, Callable[[], str]]:
        rng = self.rng
        place, place2 = distinct_pair(rng, self.places)
        thing, thing2 = distinct_pair(rng, OBJECTS)
        padj, padj2 = distinct_pair(rng, PLACE_ADJECTIVES)
        return {
            "place": lambda: place,
            "place2": lambda: place2,
            "thing": lambda: thing,
            "thing2": lambda: thing2,
            "padj": lambda: padj,
            "padj2": lambda: padj2,
            "tadj": lambda: rng.choice(OBJECT_ADJECTIVES),
            "a_tadj": lambda: with_article(rng.choice(OBJECT_ADJECTIVES)),
            "town": lambda: self.spec.town,
            "motion": lambda: rng.choice(MOTION_VERBS),
            "direction": lambda: rng.choice(DIRECTIONS),
            "time": lambda: rng.choice(TIMES),
            "adverb": lambda: rng.choice(ADVERBS),
            "perceive": lambda: rng.choice(PERCEPTION_VERBS),
            "handle": lambda: rng.choice(HANDLING_VERBS),
            "after": lambda: rng.choice(AFTER_HANDLING),
            "location": lambda: rng.choice(LOCATIONS),
            "feeling": lambda: rng.choice(FEELINGS),
            "weather": lambda: rng.choice(WEATHER).format(town=self.spec.town),
            "smell": lambda: rng.choice(SMELLS),
            "Sound": lambda: capitalize(rng.choice(SOUNDS)),
            "event": lambda: rng.choice(EVENTS),
            "duration": lambda: rng.choice(DURATIONS),
            "light": lambda: rng.choice(LIGHTS),
            "hour": lambda: rng.choice(HOURS),
        }

    def _character_slots(self, focus: Character, other: Character, named: bool,
                         ) -> dict[str, Callable[[], str]]:
        """Slots that refer to the focus character (by name or pronoun) and a companion."""
        ref = focus.name if named else focus.subject
        return {
            "Subj": lambda: capitalize(ref),
            "subj": lambda: ref,
            "pron": lambda: focus.subject,
            "name": lambda: focus.name,
            "poss": lambda: focus.possessive,
            "Poss": lambda: capitalize(focus.possessive),
            "other": lambda: other.name,
            "Other": lambda: other.name,
            "opos": lambda: other.possessive,
            # "He asked Tobias ..., but he ..." is ambiguous: repeat the name instead.
            "opr": lambda: other.subject if other.gender != focus.gender else other.name,
            "waiting": lambda: fill(self.rng.choice(WAITING_ACTIONS),
                                    {"opos": lambda: other.possessive}),
        }

    def _film(self) -> Film:
        title = self.rng.choice(FILM_TITLES)
        actor, gender = self.rng.choice(FILM_ACTORS)
        return Film(f"_{title}_" if self.spec.italic_titles else title, actor,
                    "she" if gender == "f" else "he")

    def _film_slots(self, film: Film) -> dict[str, Callable[[], str]]:
        """Slots of one sentence about `film`: fixed title and star, fresh adjectives."""
        rng = self.rng
        pos = rng.sample(POSITIVE_ADJECTIVES, 3)
        neg = rng.sample(NEGATIVE_ADJECTIVES, 3)
        aspect, aspect2 = distinct_pair(rng, FILM_ASPECTS)
        return {
            "film": lambda: film.title,
            "actor": lambda: film.star,
            "actor_pr": lambda: film.star_pronoun,
            "role": lambda: rng.choice(FILM_ROLES),
            "pos": lambda: pos[0], "pos2": lambda: pos[1], "pos3": lambda: pos[2],
            "neg": lambda: neg[0], "neg2": lambda: neg[1], "neg3": lambda: neg[2],
            "a_pos": lambda: with_article(pos[0]),
            "a_neg": lambda: with_article(neg[0]),
            "aspect": lambda: aspect,
            "aspect2": lambda: aspect2,
            "genre": lambda: rng.choice(GENRES),
        }

    # -- paragraphs --------------------------------------------------------------------------

    def _two_characters(self) -> tuple[Character, Character]:
        # The first two of the cast are the leads and turn up most often.
        weights = (5, 4, 2, 2, 1)
        first = self.rng.choices(self.spec.cast, weights=weights)[0]
        while True:
            second = self.rng.choices(self.spec.cast, weights=weights)[0]
            if second != first:
                return first, second

    def narrative_paragraph(self) -> str:
        """A paragraph of 3 to 7 sentences about two characters."""
        focus, other = self._two_characters()
        sentences = []
        used: set[str] = set()
        for i in range(self.rng.randint(3, 7)):
            slots = self._base_slots()
            slots.update(self._character_slots(focus, other, i == 0 or self.rng.random() < 0.25))
            template = self._fresh(NARRATIVE_TEMPLATES, used)
            if i == 0 and "{Subj}" not in template and "{subj}" not in template:
                template = NARRATIVE_TEMPLATES[0]
            sentences.append(fill(template, slots))
        return " ".join(sentences)

    def _speech(self, speaker: Character, utterance: str, named: bool) -> str:
        """A line of dialogue attributed by name ("said Mara"), by pronoun ("she asked") or,
        when the speaker is clear from the turn order (`named` false), sometimes not at all."""
        rng = self.rng
        end = utterance[-1]
        verb = rng.choice(SPEECH_VERBS.get(end, SPEECH_VERBS["."]))
        who = speaker.name if named else speaker.subject
        body = utterance[:-1] + "," if end == "." else utterance
        style = rng.random()
        if style < 0.15 and not named:
            return f'"{utterance}"'
        if style < 0.3 and end == ".":
            return f'{capitalize(who)} {verb}, "{utterance}"'
        # "said Mara" reads well, "said she" does not: only names follow the verb.
        attribution = f"{verb} {who}" if named and rng.random() < 0.5 else f"{who} {verb}"
        if style < 0.45 and end in ".?!":
            gesture = fill(rng.choice(GESTURES), {"poss": lambda: speaker.possessive,
                                                  "thing": lambda: rng.choice(OBJECTS)})
            return f'"{body}" {attribution}, {gesture}.'
        return f'"{body}" {attribution}.'

    def _fresh(self, pool: Sequence[str], used: set[str]) -> str:
        """A template from `pool` not yet in `used` (then remembered there)."""
        template = self.rng.choice([t for t in pool if t not in used] or list(pool))
        used.add(template)
        return template

    def _utterance(self, addressee: Character, third: Character, replying: bool,
                   used: set[str]) -> str:
        rng = self.rng
        kind = rng.random()
        if kind < 0.45:
            pool = STATEMENTS
        elif kind < 0.72:
            pool = QUESTIONS
        elif kind < 0.86:
            pool = EXCLAMATIONS
        elif kind < 0.94:
            pool = HESITATIONS
        else:
            pool = INTERRUPTIONS
        slots = self._base_slots()
        slots["addressee"] = lambda: addressee.name
        slots["third"] = lambda: third.name
        text = fill(self._fresh(pool, used), slots)
        if replying and pool is STATEMENTS and rng.random() < 0.5:
            text = rng.choice(REPLY_OPENERS) + text
        return text

    def conversation(self) -> list[str]:
        """Paragraphs of dialogue between two characters, about a third."""
        first, second = self._two_characters()
        third = next(c for c in self.rng.sample(self.spec.cast, len(self.spec.cast))
                     if c not in (first, second))
        paragraphs = []
        used: set[str] = set()
        speakers = (first, second)
        for turn in range(self.rng.randint(3, 8)):
            speaker, listener = speakers[turn % 2], speakers[(turn + 1) % 2]
            named = turn < 2 or self.rng.random() < 0.4
            utterance = self._utterance(listener, third, turn > 0, used)
            line = self._speech(speaker, utterance, named)
            if self.rng.random() < 0.25:
                slots = self._base_slots()
                slots.update(self._character_slots(speaker, listener, False))
                line += " " + fill(self.rng.choice(NARRATIVE_TEMPLATES[:6]), slots)
            paragraphs.append(line)
        return paragraphs

    def film_episode(self) -> list[str]:
        """Two characters see a film: the outing, perhaps a review, then their opinions."""
        rng = self.rng
        first, second = self._two_characters()
        film = self._film()
        verdicts = [rng.random() < 0.5, rng.random() < 0.5]
        paragraphs = [fill(
            rng.choice(FILM_OUTINGS),
            {**self._film_slots(film), **self._base_slots(),
             **self._character_slots(first, second, True)},
        )]
        if self.spec.theme == "cinema" or rng.random() < 0.3:
            paper = rng.choice(NEWSPAPERS)
            paragraphs.append(f"{first.name}'s notice in the {paper} the next morning ran as "
                              "follows.")
            pool = POSITIVE_REVIEW if verdicts[0] else NEGATIVE_REVIEW
            review = [fill(t, self._film_slots(film)) for t in rng.sample(pool, rng.randint(3, 6))]
            paragraphs.append(" ".join(review))
        used: set[str] = set()
        for turn in range(rng.randint(2, 5)):
            speaker = (first, second)[turn % 2]
            liked = verdicts[turn % 2]
            pool = POSITIVE_OPINIONS if liked else NEGATIVE_OPINIONS
            opinion = fill(self._fresh(pool, used), self._film_slots(film))
            paragraphs.append(self._speech(speaker, opinion, turn < 2))
        return paragraphs

    # -- chapters and the book -------------------------------------------------------------

    def chapter(self) -> list[str]:
        """The paragraphs of one chapter, of about CHAPTER_CHARS characters."""
        target = self.rng.randint(*CHAPTER_CHARS)
        paragraphs: list[str] = []
        size = 0
        while size < target:
            roll = self.rng.random()
            if roll < self.spec.film_share:
                block = self.film_episode()
            elif roll < self.spec.film_share + (1 - self.spec.film_share) * CONVERSATION_SHARE:
                block = self.conversation()
            else:
                block = [self.narrative_paragraph()]
            paragraphs.extend(block)
            size += sum(len(p) for p in block)
        return paragraphs

    def typeset(self, paragraph: str) -> str:
        """`paragraph` hard-wrapped at WRAP_WIDTH, with curly quotes in a typographic book."""
        if self.spec.typographic:
            paragraph = curl_quotes(paragraph)
        return textwrap.fill(paragraph, width=WRAP_WIDTH, break_long_words=False,
                             break_on_hyphens=False)

    def book(self) -> str:
        """The whole book: title, author, then its chapters."""
        parts = [self.spec.title, "", f"by {self.spec.author}", "", ""]
        for number in range(1, self.spec.chapters + 1):
            parts += ["", f"CHAPTER {roman(number)}.", ""]
            for paragraph in self.chapter():
                parts += [self.typeset(paragraph), ""]
            parts.append("")
        return "\n".join(parts).rstrip("\n") + "\n"


def make_corpus(seed: int) -> dict[str, str]:
    """File name -> text of every book."""
    books = {}
    for number, spec in enumerate(BOOKS, start=1):
        rng = random.Random(seed * 100 + number)
        books[f"{number:02d}_{spec.slug}.txt"] = BookWriter(spec, rng).book()
    return books

