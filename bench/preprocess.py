"""Clean + tokenize throughput: our stages against the original single-process GPT-1 path.

The reference is the original code's loop, one document at a time: `ftfy.fix_text` -> its
`text_standardize` (restated in reference/original_gpt1.py: speed-ups to ours do not move the
baseline) -> spaCy tokens joined by spaces -> BPE `encode`. Ours is `clean_corpus` on every
core then `tokenize_corpus`, Parquet in and Arrow shards out, as the DVC stages run them. Both start
cold (a fresh spaCy and tokenizer each repetition) and the rates are raw input MB per second.
The token ids of every document must be identical, or the benchmark fails.

Clean's worker processes are spawned, and spawning imports this module again in each: heavy
imports the workers do not need (torch, through bench.common) are made inside functions.
"""

from __future__ import annotations

import resource
import shutil
import tempfile
import time
from pathlib import Path

import ftfy
import numpy as np

from gpt1.config import ExecutorParams, load_params
from gpt1.corpus.books import split_documents
from gpt1.corpus.clean import clean_corpus
from gpt1.corpus.encode import tokenize_corpus
from gpt1.corpus.parallel import resolve_workers
from gpt1.corpus.shards import read_split
from gpt1.corpus.text import TextCleaner
from gpt1.corpus.tokenizer import GPT1Tokenizer, train_bpe
from reference.original_gpt1 import text_standardize

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "gpt1" / "sample_data" / "corpus"
PARAMS = load_params(ROOT / "params.yaml")  # the knobs the stages would run with
DOC_CHARS = PARAMS.ingest.doc_chars
TINY_DOC_CHARS, TINY_DOCS = 2_000, 3
VOCAB_SIZE, MIN_FREQUENCY = PARAMS.bpe.vocab_size, PARAMS.bpe.min_frequency
BPE_SAMPLE_BOOKS = 3  # the vocabulary is learned on the first books: enough for a real BPE
BATCH_DOCS = PARAMS.clean.batch_docs
VAL_EVERY, SHARD_TOKENS = PARAMS.tokenize.val_every, PARAMS.tokenize.shard_tokens


def reference(docs: list[str], tokenizer_path: Path) -> list[list[int]]:
    """The original path, one document at a time; empty documents are dropped, as clean does."""
    import spacy

    nlp = spacy.blank("en")
    tokenizer = GPT1Tokenizer.load(tokenizer_path)
    out = []
    for doc in docs:
        tokens = nlp.tokenizer(text_standardize(ftfy.fix_text(doc)))
        text = " ".join(t.text for t in tokens if not t.is_space)
        if text:
            out.append(tokenizer.encode(text))
    return out


def ours(raw: list[Path], tokenizer_path: Path, work: Path, workers: int) -> dict[str, float]:
    """Our clean then tokenize stages on `raw`, into `work`; seconds of each."""
    shutil.rmtree(work, ignore_errors=True)
    (work / "clean").mkdir(parents=True)
    start = time.perf_counter()
    executor = ExecutorParams(workers=workers)
    clean_corpus(raw, work / "clean" / "corpus.parquet", executor=executor, batch_docs=BATCH_DOCS,
                 min_chars=1, dedupe=False)
    cleaned = time.perf_counter()
    tokenize_corpus(work / "clean", GPT1Tokenizer.load(tokenizer_path), work / "shards",
                    val_every=VAL_EVERY, shard_tokens=SHARD_TOKENS, executor=executor)
    return {"clean": cleaned - start, "tokenize": time.perf_counter() - cleaned}


def check_identical(expected: list[list[int]], shards: Path) -> int:
    """Raise unless our shards hold exactly the reference ids of every document, split as
    tokenize splits them; return the number of documents."""
    for split, keep in (("val", lambda i: i % VAL_EVERY == 0),
                        ("train", lambda i: i % VAL_EVERY != 0)):
        docs = [(i, ids) for i, ids in enumerate(expected) if keep(i)]
        got = np.concatenate(read_split(shards / split)) if docs else np.zeros(0, np.int64)
        want_len = sum(len(ids) for _, ids in docs)
        offset = 0
        for i, ids in docs:
            if not np.array_equal(got[offset:offset + len(ids)], ids):
                raise AssertionError(f"document {i}: our token ids differ from the reference")
            offset += len(ids)
        if len(got) != want_len:
            raise AssertionError(f"{split}: {len(got)} token ids, the reference has {want_len}")
    return len(expected)


def books(tiny: bool) -> list[tuple[str, list[str]]]:
    """(source, documents) per book, split as ingest splits them."""
    from bench.common import DATA
    from gpt1.corpus.books import read_book

    if tiny:
        book = sorted(SAMPLE.glob("*.txt"))[0]
        return [(book.name, split_documents(read_book(book), TINY_DOC_CHARS)[:TINY_DOCS])]
    paths = sorted((DATA / "corpus" / "books").glob("*.txt"))
    if not paths:
        raise FileNotFoundError(f"{DATA / 'corpus' / 'books'}: no books (see ../shared/data)")
    return [(p.name, split_documents(read_book(p), DOC_CHARS)) for p in paths]


def write_raw(corpus: list[tuple[str, list[str]]], out: Path) -> list[Path]:
    """One Parquet file of documents per book, as the ingest stage writes them."""
    from gpt1.corpus.documents import write_documents

    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, (source, docs) in enumerate(corpus):
        paths.append(out / f"{i:05d}.parquet")
        write_documents(source, docs, paths[-1])
    return paths


def cpu_seconds() -> float:
    """CPU time of this process, its threads and its waited-for children (clean's workers): a
    figure other load on the machine does not inflate the way it does wall time."""
    return sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF),
                                                 resource.getrusage(resource.RUSAGE_CHILDREN)))


def train_tokenizer(corpus: list[tuple[str, list[str]]], path: Path) -> None:
    """Learn the BPE on our cleaning of the first books (not timed) and save it to `path`."""
    cleaner = TextCleaner()
    sample = [cleaner(d) for _, docs in corpus[:BPE_SAMPLE_BOOKS] for d in docs]
    train_bpe(sample, VOCAB_SIZE, MIN_FREQUENCY).save(str(path))


def main(argv: list[str] | None = None) -> Path:
    from bench.common import Table, alternate, median, parser, publish

    args = parser(__doc__.splitlines()[0]).parse_args(argv)
    repeats = 1 if args.tiny else args.repeats
    corpus = books(args.tiny)
    docs = [doc for _, doc_list in corpus for doc in doc_list]
    mb = sum(len(d.encode()) for d in docs) / 1e6
    workers = resolve_workers(0)
    with tempfile.TemporaryDirectory(prefix="bench-preprocess-") as tmp_dir:
        tmp = Path(tmp_dir)
        raw = write_raw(corpus, tmp / "raw")
        tokenizer_path = tmp / "tokenizer.json"
        train_tokenizer(corpus, tokenizer_path)

        expected: list[list[int]] = []
        stages: list[dict[str, float]] = []
        cpu: dict[str, list[float]] = {"reference": [], "ours": []}

        def run_reference() -> float:
            start, start_cpu = time.perf_counter(), cpu_seconds()
            expected[:] = reference(docs, tokenizer_path)
            cpu["reference"].append(cpu_seconds() - start_cpu)
            return time.perf_counter() - start

        def run_ours() -> float:
            start_cpu = cpu_seconds()
            stages.append(ours(raw, tokenizer_path, tmp / "ours", workers))
            cpu["ours"].append(cpu_seconds() - start_cpu)
            return sum(stages[-1].values())

        seconds = alternate({"reference": run_reference, "ours": run_ours}, repeats)
        identical = check_identical(expected, tmp / "ours" / "shards")

    ref_s, ours_s = median(seconds["reference"]), median(seconds["ours"])
    table = Table("preprocess: clean + tokenize, raw MB/s",
                  ["path", "seconds", "MB_per_s", "speedup", "cpu_seconds", "cpu_ratio"])
    ref_cpu, ours_cpu = median(cpu["reference"]), median(cpu["ours"])
    table.add(path="reference (1 process)", seconds=ref_s, MB_per_s=mb / ref_s, speedup=1.0,
              cpu_seconds=ref_cpu, cpu_ratio=1.0)
    table.add(path=f"ours ({workers} workers)", seconds=ours_s, MB_per_s=mb / ours_s,
              speedup=ref_s / ours_s, cpu_seconds=ours_cpu, cpu_ratio=ref_cpu / ours_cpu)
    for stage in ("clean", "tokenize"):
        s = median([run[stage] for run in stages])
        table.add(path=f"  ours: {stage}", seconds=s, MB_per_s=mb / s)
    table.notes += [
        f"{len(docs)} documents, {mb:.2f} MB of raw text ({len(corpus)} books); "
        f"median of {repeats}; target: ours >= 4x the reference",
        f"token ids identical to the reference for {identical}/{len(docs)} documents",
        "cpu_seconds: user + system CPU of the process tree; cpu_ratio = reference / ours",
    ]
    settings = {"repeats": repeats, "tiny": args.tiny, "workers": workers, "documents": len(docs),
                "megabytes": mb, "identical_documents": identical, "vocab_size": VOCAB_SIZE,
                "doc_chars": TINY_DOC_CHARS if args.tiny else DOC_CHARS}
    return publish([table], args.out, "preprocess", settings)


if __name__ == "__main__":
    main()
