"""Release tokenizer throughput: `load_release_tokenizer` against the original `TextEncoder`.

The reference is the original code's `TextEncoder.encode` (openai/finetune-transformer-lm's
text_utils.py, restated in reference/original_gpt1.py: nothing of ours), one document at a time.
Ours is `load_release_tokenizer(...).encode_batch` on all of them, in one process too. Both
start cold (a fresh spaCy, BPE and caches each repetition), they alternate, and the rates are
raw input MB per second. The documents are the books split as ingest splits them: paragraphs
joined by line breaks, so that the line-break tokens the original keeps are exercised, of about
`ingest.doc_chars` characters (whole books exceed the 1,000,000 characters spaCy takes at once).
The token ids of every document must be identical to the reference's in every repetition, or
the benchmark fails.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from bench.preprocess import DOC_CHARS, SAMPLE, TINY_DOC_CHARS, TINY_DOCS, cpu_seconds
from gpt1.corpus.books import read_book, split_documents
from gpt1.interop.openai_text import load_release_tokenizer
from reference.original_gpt1 import TextEncoder

ENCODER, MERGES = "encoder_bpe_40000.json", "vocab_40000.bpe"


def documents(books: list[Path], doc_chars: int, limit: int | None = None) -> list[str]:
    """Each book's documents as ingest cuts them (the first `limit` of each, if given)."""
    return [doc for book in books for doc in split_documents(read_book(book), doc_chars)[:limit]]


def book_paths(tiny: bool, data: Path) -> list[Path]:
    """The first book of the bundled sample (tiny), or every book of `data`/books."""
    folder = SAMPLE if tiny else data / "books"
    paths = sorted(folder.glob("*.txt"))[:1 if tiny else None]
    if not paths:
        raise FileNotFoundError(f"{folder}: no books (see ../shared/data)")
    return paths


def check_release(release: Path) -> None:
    missing = [name for name in (ENCODER, MERGES) if not (release / name).is_file()]
    if missing:
        raise FileNotFoundError(f"{release}: no {' or '.join(missing)} (OpenAI's released BPE, "
                                "see ../shared/data)")


def reference(release: Path, docs: list[str]) -> list[list[int]]:
    """The original: a fresh `TextEncoder`, one document at a time."""
    encoder = TextEncoder(release / ENCODER, release / MERGES)
    return [encoder.encode(doc) for doc in docs]


def check_identical(expected: list[np.ndarray], got: list[list[int]]) -> None:
    """Raise unless `got` holds exactly the reference ids of every document."""
    if len(got) != len(expected):
        raise AssertionError(f"{len(got)} documents encoded, the reference has {len(expected)}")
    for i, (want, ids) in enumerate(zip(expected, got, strict=True)):
        if not np.array_equal(want, ids):
            raise AssertionError(f"document {i}: our token ids differ from the reference")


def timed(run: Callable[[], list[list[int]]], cpu: list[float]) -> tuple[float, list[list[int]]]:
    """Wall seconds of `run()` and its result; its CPU seconds appended to `cpu`."""
    start, start_cpu = time.perf_counter(), cpu_seconds()
    result = run()
    seconds = time.perf_counter() - start
    cpu.append(cpu_seconds() - start_cpu)
    return seconds, result


def main(argv: list[str] | None = None) -> Path:
    from bench.common import DATA, Table, alternate, median, parser, publish

    p = parser(__doc__.splitlines()[0])
    p.add_argument("--release", type=Path, default=DATA / "openai-gpt1",
                   help="the folder of OpenAI's encoder_bpe_40000.json and vocab_40000.bpe")
    args = p.parse_args(argv)
    check_release(args.release)
    books = book_paths(args.tiny, DATA)
    docs = (documents(books, TINY_DOC_CHARS, TINY_DOCS) if args.tiny
            else documents(books, DOC_CHARS))
    mb = sum(len(d.encode()) for d in docs) / 1e6

    expected: list[np.ndarray] = []
    cpu: dict[str, list[float]] = {"reference": [], "ours": []}

    def run_reference() -> float:
        seconds, ids = timed(lambda: reference(args.release, docs), cpu["reference"])
        expected[:] = [np.array(doc_ids, np.int32) for doc_ids in ids]
        return seconds

    def run_ours() -> float:
        seconds, ids = timed(lambda: load_release_tokenizer(args.release).encode_batch(docs),
                             cpu["ours"])
        check_identical(expected, ids)
        return seconds

    seconds = alternate({"reference": run_reference, "ours": run_ours}, args.repeats)

    table = Table("tokenizer: OpenAI's release on raw text, raw MB/s",
                  ["path", "seconds", "MB_per_s", "speedup", "cpu_seconds", "cpu_ratio",
                   "ids_identical"])
    names = {"reference": "original TextEncoder", "ours": "ours"}
    ref_s, ref_cpu = median(seconds["reference"]), median(cpu["reference"])
    for side, values in seconds.items():
        s, side_cpu = median(values), median(cpu[side])
        table.add(path=names[side], seconds=s, MB_per_s=mb / s, speedup=ref_s / s,
                  cpu_seconds=side_cpu, cpu_ratio=ref_cpu / side_cpu,
                  ids_identical=None if side == "reference" else True)
    table.notes += [
        f"{len(docs)} documents, {mb:.2f} MB of raw text ({len(books)} books); median of "
        f"{args.repeats}; target: ours >= 4x the original",
        f"token ids identical to the original for {len(docs)}/{len(docs)} documents in each of "
        f"{args.repeats} repetitions",
        "one process each; cpu_seconds: user + system CPU; cpu_ratio = original / ours",
    ]
    settings = {"repeats": args.repeats, "tiny": args.tiny,
                "documents": len(docs), "megabytes": mb, "identical_documents": len(docs),
                "doc_chars": TINY_DOC_CHARS if args.tiny else DOC_CHARS,
                "release": str(args.release)}
    return publish([table], args.out, "tokenizer", settings)


if __name__ == "__main__":
    main()
