"""Generate the sample data bundled with gpt1 (``gpt1/sample_data/``).

This script produced the bundled sample: a handful of plain-text "books" for language-model
pretraining, an SST-2-style sentiment task in the GLUE TSV format, a small task of every other
family in its release format (CoLA, RTE, MRPC, STS-B, Story Cloze), and a README that describes
the files. All of it is original synthetic text written by the seeded probabilistic
grammar below; nothing is copied from any dataset or book. The output depends only on the seed,
so a second run rewrites byte-identical files (`tests/test_sample_data.py` checks that it
rewrites `gpt1/sample_data/` exactly).

Regenerate from the repository root with::

    python tools/make_sample_data.py            # writes gpt1/sample_data/
    python tools/make_sample_data.py --out DIR  # writes elsewhere
"""

from __future__ import annotations

import argparse
import collections
import csv
import io
import random
import re
import textwrap
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

SEED = 2018
REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO_ROOT / "gpt1" / "sample_data"

# Characters that give text cleaning (ftfy + text_standardize) something to do. They are written
# as escapes so that this file stays ASCII.
EM_DASH = "\u2014"
EN_DASH = "\u2013"
ELLIPSIS = "\u2026"
LEFT_QUOTE = "\u201c"
RIGHT_QUOTE = "\u201d"
CURLY_APOSTROPHE = "\u2019"

WRAP_WIDTH = 70
SST_SIZES = (("train", 2000), ("dev", 200), ("test", 200))
SST_LABEL_NOISE = 0.03  # share of rows whose label is flipped, like annotator disagreement
SST_MIN_TOKENS = 3
SST_MAX_TOKENS = 30


# --------------------------------------------------------------------------------------------
# Shared sentiment lexicon (used by the corpus's film reviews and by the SST-2-style task)
# --------------------------------------------------------------------------------------------

POSITIVE_ADJECTIVES = (
    "wonderful", "moving", "charming", "funny", "gripping", "beautiful", "clever", "warm",
    "tender", "thrilling", "delightful", "smart", "affecting", "inventive", "heartfelt",
    "graceful", "witty", "luminous", "engaging", "memorable", "brilliant", "lovely", "sharp",
    "absorbing", "satisfying", "fresh", "exhilarating", "rewarding", "poignant", "superb",
    "good", "great", "terrific", "entertaining", "touching",
)
NEGATIVE_ADJECTIVES = (
    "dull", "tedious", "clumsy", "boring", "lifeless", "shallow", "predictable", "bland",
    "messy", "tiresome", "flat", "pointless", "sloppy", "dreary", "forgettable", "stale",
    "labored", "muddled", "hollow", "awkward", "lazy", "plodding", "shrill", "overlong",
    "incoherent", "witless", "joyless", "cheap", "mediocre", "bad", "terrible", "awful",
    "silly", "empty", "unbearable",
)
FILM_ASPECTS = (
    "acting", "script", "pacing", "photography", "score", "dialogue", "ending", "direction",
    "editing", "humor", "cast", "plot", "set design", "lead performance", "story",
    "camera work", "music",
)
GENRES = (
    "film", "movie", "drama", "comedy", "thriller", "romance", "documentary", "debut",
    "sequel", "story", "picture", "adaptation", "melodrama", "satire", "fable", "musical",
    "mystery", "western", "love story", "period piece", "ghost story", "crime drama",
)
FILM_TITLES = (
    "The Silver Harbour", "A Lamp in the Window", "The Night Mail to Carrow",
    "The Glass Orchard", "Seven Winters", "The Quiet Bell", "Under the Cliff Road",
    "The Lighthouse Affair", "Autumn in Lisle", "The Clockmaker's Daughter",
    "Storm over Penmarrow", "The Paper Lanterns", "A Ribbon of Smoke", "The Last Ferry",
    "Two Hats in the Rain", "The Marsh King", "Midnight at the Grand Hotel Vesper",
)
FILM_ACTORS = (
    ("Margot Ellery", "f"), ("Conrad Vale", "m"), ("Lydia Marsh", "f"), ("Anton Reyes", "m"),
    ("Helena Strand", "f"), ("Oscar Dale", "m"), ("June Halloway", "f"), ("Walter Crane", "m"),
)
FILM_ROLES = (
    "the lighthouse keeper", "the young widow", "the detective", "the schoolmaster",
    "the ship's captain", "the runaway heiress", "the old clockmaker", "the village doctor",
    "the jewel thief", "the stationmaster", "the travelling singer",
)


# --------------------------------------------------------------------------------------------
# Story-world vocabulary for the corpus
# --------------------------------------------------------------------------------------------

OBJECTS = (
    "lantern", "letter", "key", "map", "compass", "ledger", "basket", "shawl", "kettle",
    "candle", "clock", "photograph", "umbrella", "violin", "notebook", "telegram", "parcel",
    "ring", "coat", "spade", "rope", "oar", "bell", "lamp", "mirror", "teacup", "satchel",
    "pipe", "locket", "envelope", "hammer", "ribbon", "newspaper", "ticket", "music box",
    "pocket watch", "sketchbook", "walking stick", "tin box", "wooden chest",
)
OBJECT_ADJECTIVES = (
    "old", "brass", "battered", "small", "heavy", "silver", "faded", "crooked", "polished",
    "broken", "little", "rusty", "painted", "worn", "plain", "curious", "familiar", "dusty",
    "red", "green", "blue", "black", "cracked", "borrowed",
)
PLACE_ADJECTIVES = (
    "quiet", "crowded", "narrow", "cold", "empty", "bright", "damp", "dark", "peaceful",
    "noisy", "shabby", "grand", "gloomy", "cheerful", "windy", "still",
)
COMMON_PLACES = (
    "square", "market", "chapel", "bridge", "lane", "kitchen", "parlour", "garden", "inn",
    "post office", "bakery", "churchyard", "high street",
)
THEME_PLACES = {
    "sea": ("harbour", "quay", "lighthouse", "boathouse", "beach", "ferry landing", "sea wall",
            "fish market", "cliff path"),
    "cinema": ("picture house", "projection room", "box office", "foyer", "newspaper office",
               "tea room", "quay", "dance hall", "railway station"),
    "mill": ("mill", "mill pond", "weir", "counting house", "river path", "orchard",
             "schoolhouse", "meadow", "forge"),
    "workshop": ("workshop", "clock tower", "town hall", "library", "attic", "cellar",
                 "jeweller's shop", "watchmaker's bench", "arcade"),
    "manor": ("hall", "library", "rose garden", "stable yard", "drawing room", "long gallery",
              "lake", "walled garden", "orangery"),
    "railway": ("station", "signal box", "platform", "goods yard", "waiting room",
                "engine shed", "level crossing", "ticket office", "viaduct"),
    "hills": ("farmhouse", "hillside", "sheepfold", "moor", "stone wall", "valley", "ridge",
              "shepherd's hut", "beck"),
}
MOTION_VERBS = (
    "walked", "hurried", "wandered", "ran", "strolled", "crept", "climbed", "went", "limped",
    "marched", "drifted", "trudged",
)
DIRECTIONS = ("across", "along", "toward", "through", "past", "around", "down to", "up to")
TIMES = (
    "before dawn", "at noon", "in the evening", "after supper", "that morning",
    "late in the afternoon", "as the bells rang", "when the rain stopped", "the next day",
    "on Sunday", "a little after nine o'clock", "at first light", "before anyone else was up",
    "in the grey hour before tea",
)
ADVERBS = (
    "slowly", "quickly", "carefully", "quietly", "gently", "suddenly", "eagerly", "reluctantly",
    "silently", "patiently", "nervously", "cheerfully", "absently", "softly",
)
PERCEPTION_VERBS = ("noticed", "saw", "glimpsed", "spotted", "found", "caught sight of")
HANDLING_VERBS = (
    "lifted", "opened", "carried", "mended", "polished", "examined", "cleaned",
    "picked up", "studied", "weighed", "unfolded",
)
AFTER_HANDLING = (
    "set it down", "turned it over", "held it up to the light", "put it back",
    "wrapped it in a cloth", "laid it on the table", "slipped it into a pocket",
)
LOCATIONS = (
    "on the windowsill", "under the stairs", "by the door", "on the mantelpiece",
    "in the bottom drawer", "beside the fire", "on the kitchen table", "behind the curtain",
    "at the end of the shelf", "in the long grass",
)
FEELINGS = (
    "felt a little afraid", "was glad of the company", "could not stop smiling",
    "grew impatient", "was tired and hungry", "felt strangely calm", "remembered the old days",
    "felt the cold for the first time", "was sorry to leave", "was suddenly very happy",
    "felt that something was wrong",
)
WEATHER = (
    "The rain fell steadily over {town}", "A cold wind came in from the west",
    "The fog lay thick along the river", "The sun was low and golden",
    "Snow had begun to fall", "It was a bright, clear morning", "Thunder rolled over the hills",
    "The air was warm and still",
)
SMELLS = ("wood smoke", "fresh bread", "salt and tar", "wet leaves", "candle wax", "coffee")
SOUNDS = ("the church bell", "a distant whistle", "the sound of the sea", "a fiddle tune")
EVENTS = (
    "great storm", "fire at the old warehouse", "winter the river froze",
    "night the bell rang by itself", "summer of the fair", "year of the flood",
    "hard winter of 1887" + EN_DASH + "88",
)
DURATIONS = ("three years", "a long time", "nearly a month", "more than a week", "a whole winter")
WAITING_ACTIONS = (
    "stamping {opos} feet against the cold", "reading a newspaper", "whistling softly",
    "with {opos} hands in {opos} pockets", "watching the road",
)
GESTURES = (
    "smiling", "without looking up", "with a small laugh", "after a pause",
    "shaking {poss} head", "folding {poss} arms", "setting down the {thing}",
)
SPEECH_VERBS = {
    ".": ("said", "said", "said", "replied", "answered", "murmured", "whispered", "added"),
    "?": ("asked", "asked", "inquired"),
    "!": ("cried", "exclaimed", "called"),
    ELLIPSIS: ("said", "murmured", "faltered"),
    EM_DASH: ("began", "started"),
}

NARRATIVE_TEMPLATES = (
    "{Subj} {motion} {direction} the {place} {time}.",
    "{Subj} {motion} {adverb} {direction} the {place}, thinking of the {tadj} {thing}.",
    "{Subj} {perceive} {a_tadj} {thing} {location}.",
    "{Subj} {handle} the {tadj} {thing} and {after}.",
    "{weather}, and {subj} {feeling}.",
    "It was {hour} when {subj} reached the {place}.",
    "For a long while nobody spoke; {name} watched the {thing}, and {other} looked out at "
    "the {place}.",
    "{Subj} wondered whether {other} had ever seen the {thing} before.",
    "{Subj} had meant to mend the {thing}" + EM_DASH + "but there had been no time, and now "
    "it was too late.",
    "The {place} was {padj} and {padj2}, and the smell of {smell} hung in the air.",
    "{Other} was waiting by the {place}, {waiting}.",
    "{Subj} {feeling}, though {pron} could not have said why.",
    "Nobody in {town} had forgotten the {event}.",
    "When {subj} came back, the {thing} was gone.",
    "{Subj} {motion} home {time}, tired but content.",
    "There was {a_tadj} {thing} on the table, and beside it a {thing2} that nobody had "
    "touched.",
    "{Sound} carried across the {place}; somewhere a dog barked, and then all was quiet.",
    "{Poss} hands were cold, and {poss} boots were wet through.",
    "{Subj} didn't answer at once.",
    "{Subj} couldn't remember where {pron} had left the {thing}.",
    "It had been {duration} since {subj} last saw {other}.",
    "Was it possible that {other} had known all along?",
    "{Subj} waited, and waited" + ELLIPSIS + " but nobody came.",
    "{Subj} asked {other} about the {thing}, but {opr} only shook {opos} head.",
    "The {place} looked {padj} in the {light}.",
    "{Subj} kept the {thing} in {poss} pocket; it was the only thing {pron} had from "
    "{poss} mother.",
    "On the way to the {place}, {subj} met {other}, who was carrying {a_tadj} {thing}.",
    "{Subj} laughed, and for a moment the {place} seemed less {padj}.",
    "It wasn't far to the {place}, but the road was steep and {subj} stopped twice to rest.",
    "{Other} said that the {thing} belonged to the {place}; {subj} was not so sure.",
    "By the time {subj} had crossed the {place}, the {light} had faded and the lamps were lit.",
    "{Subj} sat down by the window with the {thing} on {poss} knee and said nothing for a long "
    "time.",
    "What would {other} say if {opr} knew about the {thing}?",
    "{Subj} knocked twice at the door of the house by the {place}; nobody answered.",
    "The {thing} had been in the family for years, and {subj} didn't mean to lose it now.",
    "{Subj} found {other} in the {place}, bent over {a_tadj} {thing}.",
    "It was the kind of {padj} evening that {name} liked best.",
    "Somebody had left the gate of the {place} open" + EM_DASH + "{other}, perhaps, or the "
    "boy from the {place2}.",
    "{Subj} folded the letter, put it in the {thing}, and {motion} out into the {light}.",
    "There were footprints on the path to the {place2}, and {subj} followed them {adverb}.",
    "In the {place}, everyone was talking about the {event}.",
    "{Subj} promised {other} that {pron} would be back before dark.",
)
HOURS = (
    "nearly midnight", "past six o'clock", "almost dawn", "getting dark", "early afternoon",
    "already evening", "a quarter to ten",
)
LIGHTS = ("moonlight", "lamplight", "evening light", "grey light of morning", "firelight")

STATEMENTS = (
    "I don't know where the {thing} is.",
    "It's too cold to stand about by the {place}.",
    "We'll go down to the {place} in the morning.",
    "{third} said you'd be here.",
    "You mustn't worry about the {thing}.",
    "I've never seen anything like it.",
    "That's the {tadj} {thing} my father gave me.",
    "There isn't time for that now.",
    "I couldn't sleep, so I walked to the {place}.",
    "You're late again, {addressee}.",
    "It wasn't my fault, whatever {third} says.",
    "Let's not quarrel about it.",
    "I'll fetch the {thing} myself.",
    "They say the {place} will be closed by the winter.",
    "I shouldn't have said that.",
    "Everyone in {town} knows about the {thing}.",
    "You'd better sit down, {addressee}.",
    "It's only the wind.",
    "I won't tell {third}, I promise.",
    "We haven't much money left.",
    "The {thing} was here yesterday; I'm certain of it.",
)
QUESTIONS = (
    "Where did you find the {thing}?",
    "Have you seen {third} today?",
    "Why didn't you tell me?",
    "What shall we do if the {thing} is gone?",
    "Isn't it rather late to be going to the {place}?",
    "Do you think {third} knows?",
    "Who left the {thing} by the door?",
    "Can't you see I'm busy?",
    "Are you coming to the {place} tonight?",
    "What's the matter, {addressee}?",
    "How long have you known?",
    "Wasn't that the {thing} from the {place}?",
)
EXCLAMATIONS = (
    "Look at the {thing}!",
    "Come quickly, {addressee}!",
    "What a night it is!",
    "Don't touch that!",
    "Good heavens!",
    "I won't hear another word about it!",
    "You've found it at last!",
    "Mind the step!",
)
HESITATIONS = (
    "I thought" + ELLIPSIS + " well, I thought you'd gone" + ELLIPSIS,
    "If only" + ELLIPSIS + " no, never mind" + ELLIPSIS,
    "The {thing}" + ELLIPSIS + " I can't remember" + ELLIPSIS,
)
INTERRUPTIONS = (
    "But the {thing}" + EM_DASH,
    "I only meant" + EM_DASH,
    "If {third} finds out" + EM_DASH,
)
REPLY_OPENERS = ("Yes. ", "No. ", "Perhaps. ", "Of course. ", "Well! ", "Oh! ", "Listen. ")

POSITIVE_REVIEW = (
    "{film} is, on the whole, {a_pos} picture.",
    "The acting is {pos}, and the {aspect} is {pos2} from the first scene to the last.",
    "{actor} gives {a_pos} performance as {role}.",
    "I can't remember a film this {pos} in years.",
    "It isn't flawless" + EM_DASH + "the {aspect} is a little {neg}" + EM_DASH + "but it's "
    "{pos} all the same.",
    "The {aspect} is {pos}; the {aspect2} is {pos2}; and the ending is simply {pos3}.",
    "Go and see it; you won't be sorry.",
    "Even the small parts are {pos}, and the {aspect} never puts a foot wrong.",
    "It is the most {pos} {genre} of the season.",
)
NEGATIVE_REVIEW = (
    "{film} is {a_neg}, {neg2} affair.",
    "The script is {neg}; the {aspect} is {neg2}, and the ending is simply {neg3}.",
    "{actor} does what {actor_pr} can, but the picture never comes alive.",
    "I didn't believe a word of it.",
    "Don't waste your evening on it.",
    "The {aspect} isn't bad, but everything else is {neg}.",
    "It's {neg} where it should be {pos}, and {neg2} where it should be {pos2}.",
    "By the last reel half the audience was asleep, and I can't say I blamed them.",
    "It is the most {neg} {genre} of the season.",
)
POSITIVE_OPINIONS = (
    "I thought it was {pos}.",
    "Wasn't {actor} {pos}?",
    "I haven't enjoyed a picture so much in years.",
    "The {aspect} was {pos}, didn't you think?",
    "I'd see it again tomorrow!",
    "It was {pos} and {pos2}, and I cried at the end.",
)
NEGATIVE_OPINIONS = (
    "I thought it was {neg}.",
    "I've never been so bored in my life.",
    "The {aspect} was {neg}, and the rest was worse.",
    "I don't know why anyone likes that sort of thing.",
    "It was {neg} from start to finish!",
    "Wasn't it {neg}? I nearly walked out.",
)
NEWSPAPERS = ("Courier", "Evening Herald", "Weekly Gazette")


@dataclass(frozen=True)
class Character:
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
    slug: str
    title: str
    author: str
    town: str
    theme: str
    cast: tuple[Character, ...]
    chapters: int
    film_share: float  # chance that a block of a chapter is about a film
    typographic: bool = False  # curly quotes and apostrophes instead of straight ones
    italic_titles: bool = False  # film titles as _Title_, the Gutenberg way of marking italics


@dataclass(frozen=True)
class Film:
    title: str
    star: str
    star_pronoun: str


def _cast(*people: str) -> tuple[Character, ...]:
    """Characters from "Name/g" strings, g being f or m."""
    return tuple(Character(*person.split("/")) for person in people)


BOOKS = (
    BookSpec("the_lantern_at_greywater", "The Lantern at Greywater", "Ada Fenwick", "Greywater",
             "sea", _cast("Mara/f", "Jasper/m", "Mrs. Penhallow/f", "Captain Osgood/m",
                          "Nell/f"), chapters=12, film_share=0.06, italic_titles=True),
    BookSpec("the_picture_house_on_quay_street", "The Picture House on Quay Street",
             "Lionel Ashcombe", "Carrow", "cinema",
             _cast("Tamsin/f", "Felix/m", "Mr. Dunmore/m", "Odette/f", "Rufus/m"),
             chapters=12, film_share=0.4),
    BookSpec("seven_winters_at_hollin_mill", "Seven Winters at Hollin Mill", "Clara Whitlock",
             "Hollin", "mill", _cast("Beatrix/f", "Silas/m", "Tobias/m", "Hester/f",
                                     "Dr. Calloway/m"),
             chapters=11, film_share=0.05, typographic=True),
    BookSpec("the_clockmakers_apprentice", "The Clockmaker's Apprentice", "Walter Greaves",
             "Lisle", "workshop", _cast("Ezra/m", "Winifred/f", "Mr. Quill/m", "Agnes/f",
                                        "Barnaby/m"),
             chapters=12, film_share=0.08, italic_titles=True),
    BookSpec("a_summer_at_fairlie_hall", "A Summer at Fairlie Hall", "Rosamund Hale",
             "Fairlie", "manor", _cast("Delphine/f", "Crispin/m", "Lady Ashdown/f", "Gideon/m",
                                       "Lettice/f"),
             chapters=11, film_share=0.1),
    BookSpec("the_northern_line", "The Northern Line", "Horace Lumley", "Thornbury",
             "railway", _cast("Ambrose/m", "Ione/f", "Percival/m", "Miss Hollis/f",
                              "Clemency/f"),
             chapters=12, film_share=0.1, typographic=True),
    BookSpec("letters_from_the_hill_country", "Letters from the Hill Country", "Maud Ellerby",
             "Ravensgill", "hills", _cast("Rosalind/f", "Edmund/m", "Mrs. Blackwood/f",
                                          "Abel/m", "Elsie/f"),
             chapters=11, film_share=0.06),
)

CHAPTER_CHARS = (14_000, 19_000)  # range of a chapter's length before wrapping
CONVERSATION_SHARE = 0.3  # of the blocks that are not about films; the rest are narrative


# --------------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------------

_SLOT = re.compile(r"\{(\w+)\}")


def capitalize(text: str) -> str:
    """`text` with its first letter upper-cased (the rest untouched)."""
    return text[:1].upper() + text[1:]


def with_article(phrase: str) -> str:
    """`phrase` preceded by "a" or "an"."""
    return ("an " if phrase[0] in "aeiou" else "a ") + phrase


def plural(noun: str) -> str:
    """English plural of the nouns used here ("comedy" -> "comedies", "film" -> "films")."""
    if noun.endswith("y") and noun[-2:-1] not in tuple("aeiou"):
        return noun[:-1] + "ies"
    return noun + "s"


def roman(number: int) -> str:
    """Roman numeral of a positive integer below 40 (enough for chapter headings)."""
    tens, units = divmod(number, 10)
    unit_names = ("", "I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX")
    return "X" * tens + unit_names[units]


def fill(template: str, slots: dict[str, Callable[[], str]]) -> str:
    """Replace every {slot} in `template`; a slot named twice gets the same value both times."""
    chosen: dict[str, str] = {}

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in chosen:
            chosen[name] = slots[name]()
        return chosen[name]

    return _SLOT.sub(value, template)


def distinct_pair(rng: random.Random, options: Sequence[str]) -> tuple[str, str]:
    first, second = rng.sample(list(options), 2)
    return first, second


# --------------------------------------------------------------------------------------------
# Corpus: books of wrapped prose
# --------------------------------------------------------------------------------------------


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
        rng = self.rng
        first, second = self._two_characters()
        film = self._film()
        verdicts = [rng.random() < 0.5, rng.random() < 0.5]
        paragraphs = [fill(
            rng.choice((
                "That evening {name} and {other} went to the picture house to see {film}.",
                "On Saturday the {town} Picture House was showing {film}, and {name} "
                "persuaded {other} to go.",
                "{name} and {other} sat in the back row for {film}, which had opened that "
                "week.",
            )),
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
        if self.spec.typographic:
            paragraph = curl_quotes(paragraph)
        return textwrap.fill(paragraph, width=WRAP_WIDTH, break_long_words=False,
                             break_on_hyphens=False)

    def book(self) -> str:
        parts = [self.spec.title, "", f"by {self.spec.author}", "", ""]
        for number in range(1, self.spec.chapters + 1):
            parts += ["", f"CHAPTER {roman(number)}.", ""]
            for paragraph in self.chapter():
                parts += [self.typeset(paragraph), ""]
            parts.append("")
        return "\n".join(parts).rstrip("\n") + "\n"


def curl_quotes(paragraph: str) -> str:
    """Typographic quotes: "..." becomes a left/right pair, apostrophes become curly."""
    out = []
    opening = True
    for char in paragraph:
        if char == '"':
            out.append(LEFT_QUOTE if opening else RIGHT_QUOTE)
            opening = not opening
        elif char == "'":
            out.append(CURLY_APOSTROPHE)
        else:
            out.append(char)
    return "".join(out)


def make_corpus(seed: int) -> dict[str, str]:
    """File name -> text of every book."""
    books = {}
    for number, spec in enumerate(BOOKS, start=1):
        rng = random.Random(seed * 100 + number)
        books[f"{number:02d}_{spec.slug}.txt"] = BookWriter(spec, rng).book()
    return books


# --------------------------------------------------------------------------------------------
# SST-2-style sentiment sentences (lower-cased, PTB-tokenised like the GLUE release)
# --------------------------------------------------------------------------------------------

SST_SUBJECTS = (
    "the film", "this film", "the movie", "this movie", "the picture", "the script",
    "the story", "the cast", "the direction", "the ending", "the second half", "the dialogue",
    "the score", "the cinematography", "the lead performance", "the sequel",
    "the director 's latest", "the film 's central performance", "the plot", "the premise",
    "the final act", "the whole enterprise", "it", "the comedy", "the thriller",
    "the soundtrack", "the screenplay", "the editing", "the first hour", "the remake",
)
SST_PEOPLE = (
    "ellery", "vale", "marsh", "reyes", "strand", "dale", "halloway", "crane", "fenwick",
    "ashcombe",
)
INTENSIFIERS = (
    "", "", "", "very", "really", "quite", "truly", "remarkably", "consistently", "often",
    "simply", "so", "surprisingly", "thoroughly", "genuinely",
)
POSITIVE_VERDICTS = (
    "i loved every minute of it", "you 'll leave the theater smiling",
    "it 's worth seeing twice", "a must-see for anyone who loves a good {genre}",
    "one of the year 's best {genres}", "i ca n't wait to see it again",
    "it earns every one of its tears", "the kind of {genre} that stays with you",
    "a pleasure from start to finish", "it 's the best thing {person} has done",
)
NEGATIVE_VERDICTS = (
    "i could n't wait for it to end", "you 'll want your money back",
    "do n't waste your time", "it 's a chore to sit through",
    "one of the year 's worst {genres}", "nothing here makes sense", "save your money",
    "the kind of {genre} you forget on the way home", "a waste of a good cast",
    "it 's the worst thing {person} has done",
)
# (base form, third person) of verbs that are praise when they succeed
SUCCESS_VERBS = (
    ("work", "works"), ("deliver", "delivers"), ("hold your attention", "holds your attention"),
    ("come together", "comes together"), ("come alive", "comes alive"),
    ("find its footing", "finds its footing"), ("earn its ending", "earns its ending"),
    ("land", "lands"), ("satisfy", "satisfies"), ("surprise", "surprises"),
)
ASIDES = (
    "which runs almost two hours", "based on a true story", "the director 's third",
    "shot in black and white", "mostly", "at least in its first half", "of all things",
)


class SentimentWriter:
    """SST-2-style sentences for a given label, from templates with a compositional meaning."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def adjective(self, label: int) -> str:
        return self.rng.choice(POSITIVE_ADJECTIVES if label else NEGATIVE_ADJECTIVES)

    def subject(self) -> str:
        return self.rng.choice(SST_SUBJECTS)

    def copula(self, subject: str) -> str:
        if self.rng.random() < 0.3:
            return "was"
        return "'s" if subject == "it" and self.rng.random() < 0.6 else "is"

    def intensified(self, label: int) -> str:
        word = self.rng.choice(INTENSIFIERS)
        return f"{word} {self.adjective(label)}".strip()

    def verdict(self, label: int) -> str:
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
        if label:
            template = self.rng.choice((
                "not bad at all", "hardly {neg}", "never {neg} for a moment",
                "far from {neg}", "not the {neg} {genre} i expected",
            ))
        else:
            template = self.rng.choice((
                "not exactly {pos}", "hardly {pos}", "far from {pos}",
                "not nearly as {pos} as it thinks it is", "never quite {pos} enough",
            ))
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
# One task of each family in its release format: CoLA, RTE, MRPC, STS-B and Story Cloze
# --------------------------------------------------------------------------------------------

TASK_SIZES = (("train", 60), ("dev", 20), ("test", 20))
# Story Cloze has no train file: the task registry holds 374 stories of the validation file out
# for dev (the original code's split), so the sample's validation file has 60 more to train on.
STORY_CLOZE_FILES = (("cloze_test_val__spring2016.csv", 434),
                     ("cloze_test_test__spring2016.csv", 20))

TASK_PEOPLE = tuple(person for book in BOOKS for person in book.cast if " " not in person.name)
TASK_PLACES = tuple(sorted({place for places in THEME_PLACES.values() for place in places}
                           | set(COMMON_PLACES)))
COLA_SOURCES = ("sm01", "sm02", "sm03")
STORY_REMARKS = (
    "{other} asked where the {thing} came from.",
    "Nobody at the {place} knew whose it was.",
    "It was just like {poss} grandmother's.",
)
STORY_ENDINGS = (
    "{name} decided to keep the {thing}.",
    "{name} gave the {thing} to {other}.",
    "{Pron} put the {thing} back.",
    "{name} sold the {thing} at the market.",
)
STS_PEOPLE = ("man", "woman", "boy", "girl", "child", "musician", "cook", "sailor", "farmer")
STS_ACTIONS = (
    ("polishing", "polishes"), ("carrying", "carries"), ("opening", "opens"),
    ("cleaning", "cleans"), ("painting", "paints"), ("mending", "mends"),
    ("holding", "holds"), ("lifting", "lifts"),
)
STS_THINGS = ("lantern", "kettle", "basket", "violin", "umbrella", "boat", "bicycle", "chair",
              "window", "fence")
STS_PLACES = ("in the kitchen", "on the beach", "in the garden", "at the market", "on a bridge",
              "by the river", "in the rain", "on the stairs")
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


@dataclass(frozen=True)
class SampleFile:
    """One written file of a task sample and what the README says about it."""

    path: str  # under the sample root
    text: str
    rows: int
    labels: str  # the labels' counts, or "-" where the file has none


class TaskWriter:
    """Sentences about events in the books' world, each with a label a model can learn."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def other_than(self, options: Sequence[str], value: str) -> str:
        return self.rng.choice([option for option in options if option != value])

    def other_person(self, person: Character) -> Character:
        return self.rng.choice([other for other in TASK_PEOPLE if other != person])

    def event(self) -> Event:
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
        return (
            f"{e.person.name} {e.verb} the {e.adjective} {e.thing} at the {e.place} {e.time}.",
            f"{capitalize(e.time)}, {e.person.name} {e.verb} the {e.adjective} {e.thing} at the "
            f"{e.place}.",
            f"The {e.adjective} {e.thing} was {e.verb} by {e.person.name} at the {e.place} "
            f"{e.time}.",
            f"At the {e.place}, {e.person.name} {e.verb} the {e.adjective} {e.thing} {e.time}.",
        )[form]

    def paraphrase_pair(self, paraphrase: bool) -> tuple[str, str]:
        e = self.event()
        first, second = self.rng.sample(range(4), 2)
        f = e if paraphrase else self.changed(e, self.rng.choice(("person", "thing", "place")))
        return self.telling(e, first), self.telling(f, second)

    # -- STS-B: similarity is the share of facts two captions have in common -----------------

    @staticmethod
    def caption(progressive: bool, person: str, action: int, thing: str, place: str) -> str:
        verb = f"is {STS_ACTIONS[action][0]}" if progressive else STS_ACTIONS[action][1]
        return f"{capitalize(with_article(person))} {verb} {with_article(thing)} {place}."

    def similar_pair(self) -> tuple[str, str, float]:
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


Row = tuple[str, ...]  # a task example's text fields, then its label


def _unique_rows(make: Callable[[int], Row], count: int) -> list[Row]:
    """`count` rows of `make(i)` whose texts (every field but the label) never repeat."""
    rows: list[Row] = []
    seen: set[Row] = set()
    while len(rows) < count:
        row = make(len(rows))
        if row[:-1] not in seen:
            seen.add(row[:-1])
            rows.append(row)
    return rows


def _cut(rng: random.Random, rows: list[Row], sizes: Sequence[tuple[str, int]],
         ) -> dict[str, list[Row]]:
    """`rows` cut in order into parts of `sizes`, each then shuffled: rows made with alternating
    labels give every part as many of each label."""
    parts, start = {}, 0
    for name, size in sizes:
        parts[name] = rows[start:start + size]
        rng.shuffle(parts[name])
        start += size
    return parts


def _splits(rng: random.Random, make: Callable[[int], Row]) -> dict[str, list[Row]]:
    """Unique rows cut into the splits of TASK_SIZES."""
    return _cut(rng, _unique_rows(make, sum(size for _, size in TASK_SIZES)), TASK_SIZES)


def _summary(labels: Sequence[str]) -> str:
    """What the README says about a file's labels: each label's count, or "-" for none."""
    counts = sorted(collections.Counter(labels).items())
    return ", ".join(f"{label}: {n}" for label, n in counts) or "-"


def _score_summary(rows: Sequence[Row]) -> str:
    scores = [float(row[-1]) for row in rows]
    return (f"scores {min(scores):.2f} to {max(scores):.2f}, mean "
            f"{sum(scores) / len(scores):.2f}")


def _tsv_file(path: str, header: Sequence[str] | None, body: Sequence[Sequence[object]],
              labels: str = "-", bom: str = "") -> SampleFile:
    lines = [header, *body] if header else body
    text = bom + "".join("\t".join(map(str, line)) + "\n" for line in lines)
    return SampleFile(path, text, len(body), labels)


def cola_files(seed: int) -> list[SampleFile]:
    """CoLA: `source, label, mark, sentence` without a header (mark `*` on unacceptable
    sentences) for train and dev; `index, sentence` under a header for test."""
    rng = random.Random(f"{seed}-cola")
    writer = TaskWriter(rng)

    def make(i: int) -> Row:
        sentence = writer.acceptable()
        return (sentence, "1") if i % 2 else (writer.unacceptable(sentence), "0")

    files = []
    for split, rows in _splits(rng, make).items():
        path = f"glue/CoLA/{split}.tsv"
        if split == "test":
            body = [(i, sentence) for i, (sentence, _) in enumerate(rows)]
            files.append(_tsv_file(path, ("index", "sentence"), body))
        else:
            body = [(rng.choice(COLA_SOURCES), label, "" if label == "1" else "*", sentence)
                    for sentence, label in rows]
            files.append(_tsv_file(path, None, body, _summary([label for _, label in rows])))
    return files


def rte_files(seed: int) -> list[SampleFile]:
    """RTE: `index, sentence1, sentence2, label` (entailment / not_entailment) under a header;
    test without the label."""
    rng = random.Random(f"{seed}-rte")
    writer = TaskWriter(rng)

    def make(i: int) -> Row:
        entailed = i % 2 == 0
        return (*writer.entailment_pair(entailed), "entailment" if entailed else "not_entailment")

    header = ("index", "sentence1", "sentence2", "label")
    files = []
    for split, rows in _splits(rng, make).items():
        if split == "test":
            body = [(i, premise, hypothesis) for i, (premise, hypothesis, _) in enumerate(rows)]
            files.append(_tsv_file(f"glue/RTE/{split}.tsv", header[:-1], body))
        else:
            body = [(i, *row) for i, row in enumerate(rows)]
            files.append(_tsv_file(f"glue/RTE/{split}.tsv", header, body,
                                   _summary([row[-1] for row in rows])))
    return files


def mrpc_files(seed: int) -> list[SampleFile]:
    """MRPC: `Quality, #1 ID, #2 ID, #1 String, #2 String` under a header that starts with a
    byte-order mark, as in the release; test has `index` in place of `Quality` and no mark."""
    rng = random.Random(f"{seed}-mrpc")
    writer = TaskWriter(rng)

    def make(i: int) -> Row:
        paraphrase = i % 2 == 0
        return (*writer.paraphrase_pair(paraphrase), "1" if paraphrase else "0")

    names = ("#1 ID", "#2 ID", "#1 String", "#2 String")
    files = []
    for split, rows in _splits(rng, make).items():
        path = f"glue/MRPC/{split}.tsv"
        leads = range(len(rows)) if split == "test" else [label for *_, label in rows]
        body = [(lead, rng.randrange(100_000, 3_500_000), rng.randrange(100_000, 3_500_000),
                 first, second) for lead, (first, second, _) in zip(leads, rows, strict=True)]
        if split == "test":
            files.append(_tsv_file(path, ("index", *names), body))
        else:
            files.append(_tsv_file(path, ("Quality", *names), body,
                                   _summary([row[-1] for row in rows]), bom="\ufeff"))
    return files


def stsb_files(seed: int) -> list[SampleFile]:
    """STS-B: the release's ten columns (index, genre, filename, year, old_index, source1,
    source2, sentence1, sentence2, score) under a header; test without the score."""
    rng = random.Random(f"{seed}-stsb")
    writer = TaskWriter(rng)

    def make(_: int) -> Row:
        first, second, score = writer.similar_pair()
        return first, second, f"{score:.3f}"

    header = ("index", "genre", "filename", "year", "old_index", "source1", "source2",
              "sentence1", "sentence2", "score")
    files = []
    for split, rows in _splits(rng, make).items():
        labelled = split != "test"
        body = [(i, "main-captions", "MSRvid", "2012train", f"{i:04d}", "none", "none",
                 *(row if labelled else row[:-1])) for i, row in enumerate(rows)]
        files.append(_tsv_file(f"glue/STS-B/{split}.tsv", header if labelled else header[:-1],
                               body, _score_summary(rows) if labelled else "-"))
    return files


STORY_CLOZE_HEADER = ("InputStoryid", "InputSentence1", "InputSentence2", "InputSentence3",
                      "InputSentence4", "RandomFifthSentenceQuiz1", "RandomFifthSentenceQuiz2",
                      "AnswerRightEnding")


def story_cloze_files(seed: int) -> list[SampleFile]:
    """Story Cloze 2016: a CSV (standard quoting, no final newline, as released) with a story id,
    four sentences, two endings and the number (1 or 2) of the right one."""
    rng = random.Random(f"{seed}-story_cloze")
    writer = TaskWriter(rng)

    def make(i: int) -> Row:
        sentences, right, wrong = writer.story()
        endings = (right, wrong) if i % 2 else (wrong, right)
        return (*sentences, *endings, "1" if i % 2 else "2")

    rows = _unique_rows(make, sum(size for _, size in STORY_CLOZE_FILES))
    files = []
    for name, chunk in _cut(rng, rows, STORY_CLOZE_FILES).items():
        buffer = io.StringIO()
        out = csv.writer(buffer, lineterminator="\n")
        out.writerow(STORY_CLOZE_HEADER)
        out.writerows((str(uuid.UUID(int=rng.getrandbits(128), version=4)), *row)
                      for row in chunk)
        files.append(SampleFile(f"multiple_choice/story_cloze/{name}",
                                buffer.getvalue().rstrip("\n"), len(chunk),
                                _summary([row[-1] for row in chunk])))
    return files


TASK_SAMPLES = (
    ("CoLA", "classification", cola_files,
     "unacceptable sentences are acceptable ones broken by an agreement error, a doubled "
     "article, two swapped words or a dropped word"),
    ("RTE", "entailment", rte_files,
     "the hypothesis restates a fact of the premise, or the same fact with the person, thing, "
     "place or time changed"),
    ("MRPC", "similarity", mrpc_files,
     "paraphrases tell one event in two ways; the other pairs change its person, thing or "
     "place"),
    ("STS-B", "similarity (regression)", stsb_files,
     "two captions share k of four facts (person, action, thing, place); the score is 5k/4 "
     f"plus uniform noise of at most {STS_NOISE}, clipped to 0-5"),
    ("Story Cloze", "multiple choice", story_cloze_files,
     "the wrong ending names a thing (or a person) that the story never mentions"),
)


# --------------------------------------------------------------------------------------------
# README: figures measured from the written files
# --------------------------------------------------------------------------------------------


def describe(out: Path, seed: int, flipped: dict[str, int], samples: list[SampleFile]) -> str:
    """README text; sizes are read back from the files written under `out`, the SST-2 counts
    too, except `flipped` (rows per split whose label is noise), which only the generator knows,
    and the other tasks' counts, which `samples` carry."""
    corpus = sorted((out / "corpus").glob("*.txt"))
    corpus_bytes = sum(path.stat().st_size for path in corpus)
    corpus_words = 0
    texts = [path.read_text(encoding="utf-8") for path in corpus]
    curly = sum(LEFT_QUOTE in text for text in texts)
    lines = [
        "# gpt1 sample data",
        "",
        "A small offline data root for the gpt1 pipeline, laid out like a real one",
        "(`corpus/*.txt`, `glue/<TASK>/{train,dev,test}.tsv`, `multiple_choice/story_cloze/`).",
        "It is **synthetic**: original text written by the seeded probabilistic grammar in",
        "`tools/make_sample_data.py`, not copied from any dataset or book. It is the pipeline's",
        "offline default, small enough for the whole pipeline (clean, BPE, pretraining,",
        "fine-tuning) to run quickly on a CPU; scores on it say nothing about GPT-1 on real data.",
        "",
        "Regenerate (byte-identical for the same seed) from the repository root:",
        "",
        "```",
        f"python tools/make_sample_data.py --out gpt1/sample_data --seed {seed}",
        "```",
        "",
        "## corpus/",
        "",
        "Plain-text books (UTF-8, LF line endings, no Project Gutenberg header): a title line,",
        "an author line, then `CHAPTER I.` ... headings and blank-line-separated paragraphs",
        f"hard-wrapped at {WRAP_WIDTH} characters, with dialogue, a few em dashes, ellipses,",
        f"`_italic_` film titles, curly quotes in {curly} books, and film-review passages that use",
        "the sentiment vocabulary of the SST-2 sample.",
        "",
        "| file | bytes | lines | words |",
        "|---|---:|---:|---:|",
    ]
    for path, text in zip(corpus, texts, strict=True):
        words = len(text.split())
        corpus_words += words
        lines.append(f"| `corpus/{path.name}` | {path.stat().st_size:,} | "
                     f"{text.count(chr(10)):,} | {words:,} |")
    lines.append(f"| **total ({len(corpus)} files)** | **{corpus_bytes:,}** | | "
                 f"**{corpus_words:,}** |")
    lines += [
        "",
        "## glue/SST-2/",
        "",
        "The GLUE SST-2 format: tab-separated, UTF-8, no quoting (read with",
        "`quoting=csv.QUOTE_NONE`); `sentence<TAB>label` for train and dev (0 negative,",
        "1 positive; as in the GLUE release each sentence ends with a space before the tab) and",
        "`index<TAB>sentence` for test, which has no labels. Sentences are lower-cased and",
        "tokenised like SST (`it 's`, `does n't`, `-lrb-`, `--`) short film-review phrases with",
        "negation (`is n't dull`), contrast (`... , but ...`) and comparatives; no sentence",
        "occurs twice in or across the splits. Each label was flipped with probability",
        f"{SST_LABEL_NOISE} when generated (label noise, column *flipped*), so 100% accuracy is",
        "out of reach.",
        "",
        "| file | bytes | rows | label 0 | label 1 | flipped |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for split, _ in SST_SIZES:
        path = out / "glue" / "SST-2" / f"{split}.tsv"
        rows = [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines()[1:]]
        if split == "test":
            zeros = ones = "-"
        else:
            counts = collections.Counter(label for _, label in rows)
            zeros, ones = f"{counts['0']:,}", f"{counts['1']:,}"
        lines.append(f"| `glue/SST-2/{split}.tsv` | {path.stat().st_size:,} | {len(rows):,} | "
                     f"{zeros} | {ones} | {flipped[split]} |")
    return "\n".join(lines + describe_tasks(out, samples)) + "\n"


def describe_tasks(out: Path, samples: list[SampleFile]) -> list[str]:
    lines = [
        "",
        "## CoLA, RTE, MRPC, STS-B and Story Cloze",
        "",
        "Samples of CoLA, RTE, MRPC, STS-B and Story Cloze, each in its release's own format",
        "(columns, header or none, byte-order mark, quoting, test files without labels) at the",
        "paths of the task registry (`tasks` in `params.yaml`), so that a task of every family",
        "can be fine-tuned offline. The sentences tell of the people, things and places of the",
        "books; each label follows from a rule a model can learn, without label noise:",
        "",
        "| task | family | rule |",
        "|---|---|---|",
        *(f"| {title} | {family} | {rule} |" for title, family, _, rule in TASK_SAMPLES),
        "",
        "Story Cloze has no training file: the registry holds 374 stories of the validation file",
        "out for dev (the split of OpenAI's code), so the sample's validation file has "
        f"{STORY_CLOZE_FILES[0][1]}.",
        "",
        "| file | bytes | rows | labels |",
        "|---|---:|---:|---|",
    ]
    for sample in samples:
        size = (out / sample.path).stat().st_size
        lines.append(f"| `{sample.path}` | {size:,} | {sample.rows:,} | {sample.labels} |")
    return lines


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="\n") as fh:
        fh.write(text)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help="output folder (default: gpt1/sample_data in this repository)")
    parser.add_argument("--seed", type=int, default=SEED, help=f"random seed (default {SEED})")
    args = parser.parse_args(argv)
    out: Path = args.out

    for name, text in make_corpus(args.seed).items():
        write(out / "corpus" / name, text)
    total_rows = sum(size for _, size in SST_SIZES)
    splits = split_rows(make_sentiment_rows(args.seed, total_rows))
    for name, text in sst2_files(splits).items():
        write(out / "glue" / "SST-2" / name, text)
    flipped = {split: sum(row.flipped for row in rows) for split, rows in splits.items()}
    samples = [sample for *_, make, _ in TASK_SAMPLES for sample in make(args.seed)]
    for sample in samples:
        write(out / sample.path, sample.text)
    write(out / "README.md", describe(out, args.seed, flipped, samples))
    print(f"wrote the sample data to {out}")


if __name__ == "__main__":
    main()
