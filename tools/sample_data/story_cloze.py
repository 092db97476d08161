"""The Story Cloze 2016 sample: a validation and a test CSV in the release's format."""

from __future__ import annotations

import csv
import io
import random
import uuid

from tools.sample_data.events import TaskWriter
from tools.sample_data.samples import Row, SampleFile, cut, summary, unique_rows

# Story Cloze has no train file: the task registry holds 374 stories of the validation file out
# for dev (the original code's split), so the sample's validation file has 60 more to train on.
STORY_CLOZE_FILES = (("cloze_test_val__spring2016.csv", 434),
                     ("cloze_test_test__spring2016.csv", 20))
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

    rows = unique_rows(make, sum(size for _, size in STORY_CLOZE_FILES))
    files = []
    for name, chunk in cut(rng, rows, STORY_CLOZE_FILES).items():
        buffer = io.StringIO()
        out = csv.writer(buffer, lineterminator="\n")
        out.writerow(STORY_CLOZE_HEADER)
        out.writerows((str(uuid.UUID(int=rng.getrandbits(128), version=4)), *row)
                      for row in chunk)
        files.append(SampleFile(f"multiple_choice/story_cloze/{name}",
                                buffer.getvalue().rstrip("\n"), len(chunk),
                                summary([row[-1] for row in chunk])))
    return files
