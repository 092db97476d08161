"""Sentences about events in the books' world (who did what to which thing, where and when),
the raw material of the CoLA, RTE, MRPC, STS-B and Story Cloze samples."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from tools.sample_data.books import BOOKS, Character
from tools.sample_data.text import capitalize, with_article
from tools.sample_data.vocabulary import word_groups, word_pairs, words

OBJECTS = words("world", "objects")
OBJECT_ADJECTIVES = words("world", "object_adjectives")
HANDLING_VERBS = words("world", "handling_verbs")
MOTION_VERBS = words("world", "motion_verbs")
PERCEPTION_VERBS = words("world", "perception_verbs")
DIRECTIONS = words("world", "directions")
LOCATIONS = words("world", "locations")
TIMES = words("world", "times")

TASK_PEOPLE = tuple(person for book in BOOKS for person in book.cast if " " not in person.name)
TASK_PLACES = tuple(sorted({place for places in word_groups("world", "theme_places").values()
                            for place in places} | set(words("world", "common_places"))))
STORY_REMARKS = words("tasks", "story_remarks")
STORY_ENDINGS = words("tasks", "story_endings")
STS_PEOPLE = words("tasks", "sts_people")
STS_ACTIONS = word_pairs("tasks", "sts_actions")  # (progressive, third person)
STS_THINGS = words("tasks", "sts_things")
STS_PLACES = words("tasks", "sts_places")
STS_NOISE = 0.3  # half-width of the uniform noise on a similarity score


@dataclass(frozen=True)
class Event:
    """Who did what to which thing, where and when: the facts a task sentence states."""

    person: Character
    verb: str  # past tense, which is also the participle for HANDLING_VERBS
    adjective: str
    thing: str
    place: str
    time: str


class TaskWriter:
    """Sentences about events in the books' world, each with a label a model can learn."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def other_than(self, options: Sequence[str], value: str) -> str:
        """An entry of `options` other than `value`."""
        return self.rng.choice([option for option in options if option != value])

    def other_person(self, person: Character) -> Character:
        """A task person other than `person`."""
        return self.rng.choice([other for other in TASK_PEOPLE if other != person])

    def event(self) -> Event:
        """A random event: a person handled a thing at a place at a time."""
        rng = self.rng
        return Event(rng.choice(TASK_PEOPLE), rng.choice(HANDLING_VERBS),
                     rng.choice(OBJECT_ADJECTIVES), rng.choice(OBJECTS), rng.choice(TASK_PLACES),
                     rng.choice(TIMES))

    def changed(self, event: Event, field: str) -> Event:
        """`event` with one fact (person, thing, place or time) made different."""
        if field == "person":
            return replace(event, person=self.other_person(event.person))
        pools = {"thing": OBJECTS, "place": TASK_PLACES, "time": TIMES}
        return replace(event, **{field: self.other_than(pools[field], getattr(event, field))})

    # -- CoLA: acceptable sentences, and the same sentences broken --------------------------

    def acceptable(self) -> str:
        """A grammatical sentence about a random event."""
        e = self.event()
        rng = self.rng
        return rng.choice((
            f"{e.person.name} {e.verb} the {e.adjective} {e.thing}.",
            f"{e.person.name} {rng.choice(MOTION_VERBS)} {rng.choice(DIRECTIONS)} the {e.place} "
            f"{e.time}.",
            f"The {e.thing} was {rng.choice(LOCATIONS)}.",
            f"{capitalize(e.person.subject)} {rng.choice(PERCEPTION_VERBS)} "
            f"{with_article(e.adjective)} {e.thing} {rng.choice(LOCATIONS)}.",
            f"{e.person.name} and {self.other_person(e.person).name} were waiting by the "
            f"{e.place}.",
        ))

    def unacceptable(self, sentence: str) -> str:
        """`sentence` broken by an agreement error, a doubled article, two words swapped or
        its second word dropped."""
        words = sentence[:-1].split()
        agreement = {"was": "were", "were": "was"}
        kinds = ["swap", "drop"]
        kinds += ["agreement"] * any(word in agreement for word in words)
        kinds += ["double"] * ("the" in words)
        kind = self.rng.choice(kinds)
        if kind == "agreement":
            words = [agreement.get(word, word) for word in words]
        elif kind == "double":
            at = words.index("the")
            words.insert(at, "the")
        elif kind == "swap":
            at = self.rng.randrange(1, len(words) - 1)
            words[at], words[at + 1] = words[at + 1], words[at]
        else:
            del words[1]
        return " ".join(words) + "."

    # -- RTE: does the premise state the hypothesis? -----------------------------------------

    def entailment_pair(self, entailed: bool) -> tuple[str, str]:
        """A premise and a hypothesis that it states (`entailed`) or gets one fact wrong."""
        e = self.event()
        rng = self.rng
        other = self.other_person(e.person)
        premise = (f"{e.person.name} {rng.choice(MOTION_VERBS)} to the {e.place} {e.time} and "
                   f"{e.verb} the {e.adjective} {e.thing}.")
        if rng.random() < 0.5:
            premise += f" {other.name} was waiting by the {self.other_than(TASK_PLACES, e.place)}."
        facts: tuple[tuple[Callable[[Event], str], tuple[str, ...]], ...] = (
            (lambda x: f"{x.person.name} {x.verb} the {x.thing}.", ("person", "thing")),
            (lambda x: f"{x.person.name} went to the {x.place}.", ("person", "place")),
            (lambda x: f"The {x.thing} was {x.verb} {x.time}.", ("thing", "time")),
            (lambda x: f"{x.person.name} was at the {x.place} {x.time}.",
             ("person", "place", "time")),
        )
        state, fields = rng.choice(facts)
        if entailed:
            return premise, state(e)
        field = rng.choice(fields)
        # a changed person is the premise's other person (who did not do it), where it has one
        changed = replace(e, person=other) if field == "person" else self.changed(e, field)
        return premise, state(changed)

    # -- MRPC: the same event told two ways, or a different event ----------------------------

    def telling(self, e: Event, form: int) -> str:
        """`e` told in one of four word orders (`form` 0 to 3)."""
        return (
            f"{e.person.name} {e.verb} the {e.adjective} {e.thing} at the {e.place} {e.time}.",
            f"{capitalize(e.time)}, {e.person.name} {e.verb} the {e.adjective} {e.thing} at the "
            f"{e.place}.",
            f"The {e.adjective} {e.thing} was {e.verb} by {e.person.name} at the {e.place} "
            f"{e.time}.",
            f"At the {e.place}, {e.person.name} {e.verb} the {e.adjective} {e.thing} {e.time}.",
        )[form]

    def paraphrase_pair(self, paraphrase: bool) -> tuple[str, str]:
        """One event told two ways (`paraphrase`), or two events that differ in one fact."""
        e = self.event()
        first, second = self.rng.sample(range(4), 2)
        f = e if paraphrase else self.changed(e, self.rng.choice(("person", "thing", "place")))
        return self.telling(e, first), self.telling(f, second)

    # -- STS-B: similarity is the share of facts two captions have in common -----------------

    @staticmethod
    def caption(progressive: bool, person: str, action: int, thing: str, place: str) -> str:
        """A caption: "A man is polishing a lantern ..." (or "polishes", not `progressive`)."""
        verb = f"is {STS_ACTIONS[action][0]}" if progressive else STS_ACTIONS[action][1]
        return f"{capitalize(with_article(person))} {verb} {with_article(thing)} {place}."

    def similar_pair(self) -> tuple[str, str, float]:
        """Two captions and their similarity score, 0 to 5."""
        rng = self.rng
        facts = [rng.choice(STS_PEOPLE), rng.randrange(len(STS_ACTIONS)), rng.choice(STS_THINGS),
                 rng.choice(STS_PLACES)]
        shared = rng.randint(0, len(facts))
        kept = set(rng.sample(range(len(facts)), shared))
        pools: tuple[Sequence[object], ...] = (STS_PEOPLE, range(len(STS_ACTIONS)), STS_THINGS,
                                               STS_PLACES)
        other = [fact if i in kept else rng.choice([x for x in pools[i] if x != fact])
                 for i, fact in enumerate(facts)]
        score = 5 * shared / len(facts) + rng.uniform(-STS_NOISE, STS_NOISE)
        progressive = rng.random() < 0.5  # the two captions word the action differently
        return (self.caption(progressive, *facts), self.caption(not progressive, *other),
                min(5.0, max(0.0, score)))

    # -- Story Cloze: the right ending is about the story's thing and people -----------------

    def story(self) -> tuple[list[str], str, str]:
        """Four sentences, the right ending and a wrong one, which names a thing (or a person)
        the story never mentions."""
        e = self.event()
        rng = self.rng
        other = self.other_person(e.person)
        slots = {"name": e.person.name, "other": other.name, "thing": e.thing,
                 "place": e.place, "Pron": capitalize(e.person.subject),
                 "poss": e.person.possessive}
        remark = rng.choice(STORY_REMARKS)
        sentences = [
            f"{e.person.name} {rng.choice(MOTION_VERBS)} to the {e.place}.",
            f"{slots['Pron']} {rng.choice(PERCEPTION_VERBS)} {with_article(e.thing)} "
            f"{rng.choice(LOCATIONS)}.",
            f"{slots['Pron']} {e.verb} the {e.thing}.",
            remark.format(**slots),
        ]
        ending = rng.choice(STORY_ENDINGS)
        wrong = dict(slots, thing=self.other_than(OBJECTS, e.thing))
        if "{other}" in ending and "{other}" in remark and rng.random() < 0.5:
            wrong = dict(slots, other=self.other_person(other).name)
        return sentences, ending.format(**slots), ending.format(**wrong)

