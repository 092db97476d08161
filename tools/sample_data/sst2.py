"""SST-2-style sentiment sentences (lower-cased, PTB-tokenised like the GLUE release) and the
GLUE SST-2 files made of them."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from tools.sample_data.text import plural, with_article
from tools.sample_data.vocabulary import word_pairs, words

SST_SIZES = (("train", 2000), ("dev", 200), ("test", 200))
SST_LABEL_NOISE = 0.03  # share of rows whose label is flipped, like annotator disagreement
SST_MIN_TOKENS = 3
SST_MAX_TOKENS = 30

# the sentiment lexicon the corpus's film reviews share
POSITIVE_ADJECTIVES = words("lexicon", "positive_adjectives")
NEGATIVE_ADJECTIVES = words("lexicon", "negative_adjectives")
FILM_ASPECTS = words("lexicon", "film_aspects")
GENRES = words("lexicon", "genres")

SST_SUBJECTS = words("sst2", "subjects")
SST_PEOPLE = words("sst2", "people")
INTENSIFIERS = words("sst2", "intensifiers")  # "" (none) among them
POSITIVE_VERDICTS = words("sst2", "positive_verdicts")
NEGATIVE_VERDICTS = words("sst2", "negative_verdicts")
# (base form, third person) of verbs that are praise when they succeed
SUCCESS_VERBS = word_pairs("sst2", "success_verbs")
ASIDES = words("sst2", "asides")
HEDGED_POSITIVE = words("sst2", "hedged_positive")  # praise by negating a {neg} adjective
HEDGED_NEGATIVE = words("sst2", "hedged_negative")  # blame by hedging a {pos} adjective


class SentimentWriter:
    """SST-2-style sentences for a given label, from templates with a compositional meaning."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def adjective(self, label: int) -> str:
        """A positive (label 1) or negative (label 0) adjective."""
        return self.rng.choice(POSITIVE_ADJECTIVES if label else NEGATIVE_ADJECTIVES)

    def subject(self) -> str:
        """What a sentence is about ("the script", "it", ...)."""
        return self.rng.choice(SST_SUBJECTS)

    def copula(self, subject: str) -> str:
        """The verb after `subject`: "is", "was" or, after "it", often "'s"."""
        if self.rng.random() < 0.3:
            return "was"
        return "'s" if subject == "it" and self.rng.random() < 0.6 else "is"

    def intensified(self, label: int) -> str:
        """An adjective of `label`, perhaps after an intensifier ("truly dull")."""
        word = self.rng.choice(INTENSIFIERS)
        return f"{word} {self.adjective(label)}".strip()

    def verdict(self, label: int) -> str:
        """A whole-film verdict of `label` ("save your money")."""
        template = self.rng.choice(POSITIVE_VERDICTS if label else NEGATIVE_VERDICTS)
        genre = self.rng.choice(GENRES)
        return template.format(genre=genre, genres=plural(genre),
                               person=self.rng.choice(SST_PEOPLE))

    # -- templates: each returns a sentence whose sentiment is `label` ---------------------

    def simple(self, label: int) -> str:
        subject = self.subject()
        return f"{subject} {self.copula(subject)} {self.intensified(label)} ."

    def noun_phrase(self, label: int) -> str:
        first = self.intensified(label)
        if self.rng.random() < 0.5:
            return f"{with_article(first)} {self.rng.choice(GENRES)}"
        second = self.adjective(label)
        return f"{with_article(first)} and {second} {self.rng.choice(GENRES)}"

    def adjective_pair(self, label: int) -> str:
        first, second = self.rng.sample(POSITIVE_ADJECTIVES if label else NEGATIVE_ADJECTIVES, 2)
        joiner = self.rng.choice((" and ", " , ", " , even "))
        return f"{first}{joiner}{second}"

    def negated(self, label: int) -> str:
        subject = self.subject()
        verb = self.rng.choice(("is", "was"))
        negation = self.rng.choice(("n't", "not", "never"))
        return f"{subject} {verb} {negation} {self.adjective(1 - label)} ."

    def contrast(self, label: int) -> str:
        first, second = self.rng.sample(SST_SUBJECTS, 2)
        before = f"{first} {self.copula(first)} {self.intensified(1 - label)}"
        after = f"{second} {self.copula(second)} {self.intensified(label)}"
        if self.rng.random() < 0.5:
            return f"{before} , but {after} ."
        return f"although {before} , {after} ."

    def verdict_sentence(self, label: int) -> str:
        if self.rng.random() < 0.5:
            return self.verdict(label)
        subject = self.subject()
        adjective = self.adjective(label)
        return f"{subject} {self.copula(subject)} {adjective} -- {self.verdict(label)} ."

    def mixed_verdicts(self, label: int) -> str:
        return f"{self.verdict(1 - label)} ? no , {self.verdict(label)} ."

    def comparative(self, label: int) -> str:
        return f"more {self.adjective(label)} than {self.adjective(1 - label)}"

    def hedged(self, label: int) -> str:
        template = self.rng.choice(HEDGED_POSITIVE if label else HEDGED_NEGATIVE)
        return template.format(pos=self.adjective(1), neg=self.adjective(0),
                               genre=self.rng.choice(GENRES))

    def success(self, label: int) -> str:
        subject = self.subject()
        base, third = self.rng.choice(SUCCESS_VERBS)
        if label:
            form = self.rng.choice((third, f"never fails to {base}", f"somehow {third}"))
        else:
            form = self.rng.choice((f"does n't {base}", f"never quite {third}",
                                    f"ca n't {base}", f"did n't {base}"))
        return f"{subject} {form} ."

    def person(self, label: int) -> str:
        person = self.rng.choice(SST_PEOPLE)
        aspect = self.rng.choice(FILM_ASPECTS)
        return f"{person} 's {aspect} is {self.intensified(label)}"

    def parenthetical(self, label: int) -> str:
        subject = self.subject()
        aside = self.rng.choice(ASIDES)
        return f"{subject} -lrb- {aside} -rrb- is {self.intensified(label)} ."

    def exclamation(self, label: int) -> str:
        return f"what {with_article(self.adjective(label))} {self.rng.choice(GENRES)} !"

    def conditional(self, label: int) -> str:
        genres = plural(self.rng.choice(GENRES))
        subject = self.subject()
        return f"if you like {genres} , {subject} is {self.intensified(label)} ."

    def quoted(self, label: int) -> str:
        noun = self.rng.choice(("twist", "comedy", "romance", "message", "ending"))
        return f'the so-called " {noun} " is {self.intensified(label)} .'

    def sentence(self, label: int) -> str:
        """A sentence of `label` from one of the templates above, drawn by weight."""
        templates: tuple[tuple[Callable[[int], str], int], ...] = (
            (self.simple, 14), (self.noun_phrase, 10), (self.adjective_pair, 6),
            (self.negated, 10), (self.contrast, 12), (self.verdict_sentence, 10),
            (self.mixed_verdicts, 3), (self.comparative, 5), (self.hedged, 7),
            (self.success, 8), (self.person, 6), (self.parenthetical, 3),
            (self.exclamation, 2), (self.conditional, 3), (self.quoted, 1),
        )
        functions, weights = zip(*templates, strict=True)
        make = self.rng.choices(functions, weights=weights)[0]
        return " ".join(make(label).split())


@dataclass(frozen=True)
class SentimentRow:
    """One sentence of the SST-2 sample and its (perhaps flipped) label."""

    sentence: str
    label: int
    flipped: bool  # the label is the opposite of what the template meant (label noise)


def make_sentiment_rows(seed: int, count: int) -> list[SentimentRow]:
    """`count` unique rows with about as many positive as negative labels.

    A small share of labels is flipped on purpose so that no model can reach 100% accuracy.
    """
    rng = random.Random(seed)
    writer = SentimentWriter(rng)
    seen: set[str] = set()
    rows: list[SentimentRow] = []
    while len(rows) < count:
        label = len(rows) % 2 if rng.random() < 0.9 else rng.randint(0, 1)
        sentence = writer.sentence(label)
        if sentence in seen or not SST_MIN_TOKENS <= len(sentence.split()) <= SST_MAX_TOKENS:
            continue
        seen.add(sentence)
        flipped = rng.random() < SST_LABEL_NOISE
        rows.append(SentimentRow(sentence, 1 - label if flipped else label, flipped))
    rng.shuffle(rows)
    return rows


def split_rows(rows: list[SentimentRow]) -> dict[str, list[SentimentRow]]:
    """The rows cut, in order, into the splits of SST_SIZES."""
    splits = {}
    start = 0
    for split, size in SST_SIZES:
        splits[split] = rows[start:start + size]
        start += size
    return splits


def sst2_files(splits: dict[str, list[SentimentRow]]) -> dict[str, str]:
    """GLUE SST-2 files: `sentence<TAB>label` for train/dev, `index<TAB>sentence` for test.

    As in the GLUE release, train and dev sentences end with one space before the tab.
    """
    files = {}
    for split, chunk in splits.items():
        if split == "test":
            lines = ["index\tsentence"] + [f"{i}\t{row.sentence}" for i, row in enumerate(chunk)]
        else:
            lines = ["sentence\tlabel"] + [f"{row.sentence} \t{row.label}" for row in chunk]
        files[f"{split}.tsv"] = "\n".join(lines) + "\n"
    return files


# --------------------------------------------------------------------------------------------
