"""The files of docs/your-data.md's worked example, written as a user's tools write them: film
reviews in CSV (quoted reviews over several lines, doubled quotes, CRLF, a byte-order mark, no
final newline) and sentence pairs for three-way entailment in one TSV whose `set` column names
each row's split. Seeded, and learnable from word cues alone, so that a small model fine-tuned
on them clears the majority class."""

from __future__ import annotations

import csv
import io
import random
from pathlib import Path

GOOD = ["a lovely film", "I loved the cast", "wonderful and moving", "a great story, well told",
        "beautiful music", "the best picture this year"]
BAD = ["a dull film", "I hated the ending", "boring and far too long",
       "a terrible story, badly told", "awful music", "the worst picture this year"]
SCENES = ["The rain fell steadily that evening.", "We saw it at the picture house on Quay Street.",
          'The "twist" came late.', "My sister came with me."]
PEOPLE = ["the miller", "the clockmaker", "the old woman", "the boy", "the lantern keeper"]
PLACES = ["the river", "the hall", "the mill", "the station", "the hill"]


def _review(rng: random.Random, good: bool) -> str:
    phrases = rng.sample(GOOD if good else BAD, k=rng.randint(1, 2))
    lines = [", ".join(phrases).capitalize() + ".", rng.choice(SCENES)]
    return "\n".join(lines) if rng.random() < 0.3 else " ".join(lines)  # some over two lines


def _csv(rows: list[list[str]], delimiter: str = ",") -> str:
    out = io.StringIO()
    csv.writer(out, delimiter=delimiter, lineterminator="\r\n").writerows(rows)
    return out.getvalue()


def write_reviews(folder: Path, seed: int = 0, train: int = 240, dev: int = 80,
                  new: int = 30) -> None:
    """`train.csv`, `dev.csv` (review, stars: 1, 2, 4 or 5) and `new.csv` (id, review)."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for name, count in (("train", train), ("dev", dev)):
        rows = [["review", "stars"]]
        for _ in range(count):
            good = rng.random() < 0.6  # positive reviews are the majority
            rows.append([_review(rng, good), rng.choice(["4", "5"] if good else ["1", "2"])])
        (folder / f"{name}.csv").write_text(_csv(rows), encoding="utf-8-sig", newline="")
    rows = [["id", "review"], *([str(i), _review(rng, rng.random() < 0.5)] for i in range(new))]
    (folder / "new.csv").write_text(_csv(rows).removesuffix("\r\n"), encoding="utf-8",
                                    newline="")


def _pair(rng: random.Random, judgment: str) -> tuple[str, str]:
    who, where = rng.choice(PEOPLE), rng.choice(PLACES)
    premise = f"{who} walked to {where} in the rain"
    if judgment == "entailment":
        return premise, f"{who} walked to {where}"
    if judgment == "contradiction":
        return premise, f"nobody walked to {where}"
    other = rng.choice([p for p in PEOPLE if p != who])
    return premise, f"{other} sang a song at home"


def write_pairs(folder: Path, seed: int = 1, sizes: tuple[int, int, int] = (240, 90, 30)) -> None:
    """`pairs.tsv`: sentence_a, sentence_b, judgment, set (TRAIN, TRIAL or TEST)."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    rows = [["sentence_a", "sentence_b", "judgment", "set"]]
    for split, count in zip(("TRAIN", "TRIAL", "TEST"), sizes, strict=True):
        for _ in range(count):
            judgment = rng.choice(["entailment", "neutral", "contradiction"])
            rows.append([*_pair(rng, judgment), judgment, split])
    (folder / "pairs.tsv").write_text(_csv(rows, delimiter="\t"), encoding="utf-8", newline="")


def write_example(root: Path) -> None:
    """The worked example's files under the data root `root`."""
    write_reviews(root / "reviews")
    write_pairs(root / "pairs")
