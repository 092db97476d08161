"""The sample's README: `data/readme_template.md` filled with figures measured from the files."""

from __future__ import annotations

import collections
from collections.abc import Sequence
from pathlib import Path
from string import Template

from tools.sample_data.corpus import WRAP_WIDTH
from tools.sample_data.events import STS_NOISE
from tools.sample_data.samples import SampleFile
from tools.sample_data.sst2 import SST_LABEL_NOISE, SST_SIZES
from tools.sample_data.story_cloze import STORY_CLOZE_FILES
from tools.sample_data.text import LEFT_QUOTE
from tools.sample_data.vocabulary import DATA

TEMPLATE = DATA / "readme_template.md"


def corpus_rows(books: Sequence[Path], texts: Sequence[str]) -> list[str]:
    """The corpus table's rows: each book's bytes, lines and words, then the total."""
    rows, total_words = [], 0
    for path, text in zip(books, texts, strict=True):
        words = len(text.split())
        total_words += words
        rows.append(f"| `corpus/{path.name}` | {path.stat().st_size:,} | "
                    f"{text.count(chr(10)):,} | {words:,} |")
    total_bytes = sum(path.stat().st_size for path in books)
    rows.append(f"| **total ({len(books)} files)** | **{total_bytes:,}** | | "
                f"**{total_words:,}** |")
    return rows


def sst2_rows(out: Path, flipped: dict[str, int]) -> list[str]:
    """The SST-2 table's rows, counted from the files written under `out`, but `flipped`."""
    rows = []
    for split, _ in SST_SIZES:
        path = out / "glue" / "SST-2" / f"{split}.tsv"
        lines = [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines()[1:]]
        if split == "test":
            zeros = ones = "-"
        else:
            counts = collections.Counter(label for _, label in lines)
            zeros, ones = f"{counts['0']:,}", f"{counts['1']:,}"
        rows.append(f"| `glue/SST-2/{split}.tsv` | {path.stat().st_size:,} | {len(lines):,} | "
                    f"{zeros} | {ones} | {flipped[split]} |")
    return rows


def task_file_rows(out: Path, samples: Sequence[SampleFile]) -> list[str]:
    """The other tasks' table rows: each file's size under `out`, rows and label counts."""
    return [f"| `{sample.path}` | {(out / sample.path).stat().st_size:,} | {sample.rows:,} | "
            f"{sample.labels} |" for sample in samples]


def describe(out: Path, seed: int, flipped: dict[str, int], samples: Sequence[SampleFile]) -> str:
    """README text; sizes are read back from the files written under `out`, the SST-2 counts
    too, except `flipped` (rows per split whose label is noise), which only the generator knows,
    and the other tasks' counts, which `samples` carry."""
    books = sorted((out / "corpus").glob("*.txt"))
    texts = [path.read_text(encoding="utf-8") for path in books]
    template = Template(TEMPLATE.read_text(encoding="utf-8"))
    return template.substitute(
        seed=seed,
        wrap_width=WRAP_WIDTH,
        curly_books=sum(LEFT_QUOTE in text for text in texts),
        corpus_rows="\n".join(corpus_rows(books, texts)),
        label_noise=SST_LABEL_NOISE,
        sst2_rows="\n".join(sst2_rows(out, flipped)),
        sts_noise=STS_NOISE,
        story_cloze_val_rows=STORY_CLOZE_FILES[0][1],
        task_file_rows="\n".join(task_file_rows(out, samples)),
    )
