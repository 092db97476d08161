"""CoLA, RTE, MRPC and STS-B samples, each in its GLUE release's format."""

from __future__ import annotations

import random

from tools.sample_data.events import TaskWriter
from tools.sample_data.samples import Row, SampleFile, score_summary, splits, summary, tsv_file
from tools.sample_data.vocabulary import words

COLA_SOURCES = words("tasks", "cola_sources")


def cola_files(seed: int) -> list[SampleFile]:
    """CoLA: `source, label, mark, sentence` without a header (mark `*` on unacceptable
    sentences) for train and dev; `index, sentence` under a header for test."""
    rng = random.Random(f"{seed}-cola")
    writer = TaskWriter(rng)

    def make(i: int) -> Row:
        sentence = writer.acceptable()
        return (sentence, "1") if i % 2 else (writer.unacceptable(sentence), "0")

    files = []
    for split, rows in splits(rng, make).items():
        path = f"glue/CoLA/{split}.tsv"
        if split == "test":
            body = [(i, sentence) for i, (sentence, _) in enumerate(rows)]
            files.append(tsv_file(path, ("index", "sentence"), body))
        else:
            body = [(rng.choice(COLA_SOURCES), label, "" if label == "1" else "*", sentence)
                    for sentence, label in rows]
            files.append(tsv_file(path, None, body, summary([label for _, label in rows])))
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
    for split, rows in splits(rng, make).items():
        if split == "test":
            body = [(i, premise, hypothesis) for i, (premise, hypothesis, _) in enumerate(rows)]
            files.append(tsv_file(f"glue/RTE/{split}.tsv", header[:-1], body))
        else:
            body = [(i, *row) for i, row in enumerate(rows)]
            files.append(tsv_file(f"glue/RTE/{split}.tsv", header, body,
                                   summary([row[-1] for row in rows])))
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
    for split, rows in splits(rng, make).items():
        path = f"glue/MRPC/{split}.tsv"
        leads = range(len(rows)) if split == "test" else [label for *_, label in rows]
        body = [(lead, rng.randrange(100_000, 3_500_000), rng.randrange(100_000, 3_500_000),
                 first, second) for lead, (first, second, _) in zip(leads, rows, strict=True)]
        if split == "test":
            files.append(tsv_file(path, ("index", *names), body))
        else:
            files.append(tsv_file(path, ("Quality", *names), body,
                                   summary([row[-1] for row in rows]), bom="\ufeff"))
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
    for split, rows in splits(rng, make).items():
        labelled = split != "test"
        body = [(i, "main-captions", "MSRvid", "2012train", f"{i:04d}", "none", "none",
                 *(row if labelled else row[:-1])) for i, row in enumerate(rows)]
        files.append(tsv_file(f"glue/STS-B/{split}.tsv", header if labelled else header[:-1],
                               body, score_summary(rows) if labelled else "-"))
    return files
