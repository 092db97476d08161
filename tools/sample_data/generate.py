"""Write the whole sample (corpus, SST-2, the other tasks, then the README) under a folder."""

from __future__ import annotations

from pathlib import Path

from tools.sample_data.corpus import make_corpus
from tools.sample_data.glue import cola_files, mrpc_files, rte_files, stsb_files
from tools.sample_data.readme import describe
from tools.sample_data.sst2 import SST_SIZES, make_sentiment_rows, split_rows, sst2_files
from tools.sample_data.story_cloze import story_cloze_files

SEED = 2018
# the task samples, in the order of the README's table of their files
TASK_SAMPLES = (cola_files, rte_files, mrpc_files, stsb_files, story_cloze_files)


def write(path: Path, text: str) -> None:
    """Write `text` to `path` as UTF-8 with LF line ends, making its folder if needed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="\n") as fh:
        fh.write(text)


def generate(out: Path, seed: int = SEED) -> None:
    """Write every file of the sample for `seed` under `out`."""
    for name, text in make_corpus(seed).items():
        write(out / "corpus" / name, text)
    total_rows = sum(size for _, size in SST_SIZES)
    splits = split_rows(make_sentiment_rows(seed, total_rows))
    for name, text in sst2_files(splits).items():
        write(out / "glue" / "SST-2" / name, text)
    flipped = {split: sum(row.flipped for row in rows) for split, rows in splits.items()}
    samples = [sample for make in TASK_SAMPLES for sample in make(seed)]
    for sample in samples:
        write(out / sample.path, sample.text)
    write(out / "README.md", describe(out, seed, flipped, samples))
