"""Peak memory of the clean and tokenize steps on the books and on ten times the books.

Each step runs in a fresh process (`python -m bench.memory --step ...`) while this one samples
the resident memory of its whole process tree, clean's workers included, every 20 ms; the peak
of that sum is the figure. The step also reports its own `ru_maxrss` and its children's.
Streaming steps hold bounded batches, so ten times the input should need about the same memory.

Exact copies would be dropped by clean's dedupe and no longer be ten times the work, so both
sizes run with dedupe off. Heavy imports are made inside functions: the step processes, and
clean's spawned workers, import this module and should not carry torch (bench.common's).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import psutil

from bench.preprocess import (
    BATCH_DOCS,
    PARAMS,
    SHARD_TOKENS,
    VAL_EVERY,
    books,
    train_tokenizer,
    write_raw,
)
from gpt1.config import ExecutorParams

STEPS = ("clean", "tokenize")
COPIES = 10
MIN_CHARS = PARAMS.clean.min_chars
SAMPLE_SECONDS = 0.02


def run_step(step: str, src: Path, dst: Path, tokenizer_path: Path | None) -> None:
    """One step on `src` into `dst`, as the stage runs it; prints its seconds and ru_maxrss."""
    start = time.perf_counter()
    if step == "clean":
        from gpt1.corpus.clean import clean_corpus

        clean_corpus(sorted(src.glob("*.parquet")), dst / "corpus.parquet",
                     executor=ExecutorParams(), batch_docs=BATCH_DOCS, min_chars=MIN_CHARS,
                     dedupe=False)
    else:
        from gpt1.corpus.encode import tokenize_corpus
        from gpt1.corpus.tokenizer import GPT1Tokenizer

        if tokenizer_path is None:
            raise ValueError("the tokenize step needs --tokenizer")
        tokenize_corpus(src, GPT1Tokenizer.load(tokenizer_path), dst, val_every=VAL_EVERY,
                        shard_tokens=SHARD_TOKENS, executor=ExecutorParams())
    # ru_maxrss survives fork + exec, so for this process it would report the benchmark's own
    # size at the fork; VmHWM, the peak of this process's memory map, starts afresh at exec.
    status = Path("/proc/self/status").read_text().splitlines()
    hwm_kib = int(next(line for line in status if line.startswith("VmHWM:")).split()[1])
    print(json.dumps({"seconds": time.perf_counter() - start, "hwm_mb": hwm_kib / 1024,
                      "children_maxrss_mb":  # KiB on Linux; the largest of clean's workers
                          resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))


def tree_rss(proc: psutil.Process) -> int:
    """Resident bytes of `proc` and all its descendants (those that exit meanwhile count 0)."""
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        with contextlib.suppress(psutil.NoSuchProcess):
            total += p.memory_info().rss
    return total


def run_sampled(cmd: list[str], cwd: Path, env: dict[str, str] | None = None,
                with_stderr: bool = False) -> tuple[int, str, float]:
    """Run `cmd` to its end, sampling the resident memory of its process tree every
    SAMPLE_SECONDS; its exit code, its output (stdout, and stderr `with_stderr`) and the peak
    (MB)."""
    peak = 0
    with subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, text=True,
                          stderr=subprocess.STDOUT if with_stderr else None) as child:
        proc = psutil.Process(child.pid)
        while child.poll() is None:
            try:
                peak = max(peak, tree_rss(proc))
            except psutil.NoSuchProcess:
                break
            time.sleep(SAMPLE_SECONDS)
        out = child.stdout.read() if child.stdout else ""
    return child.returncode, out, peak / 2**20


def measure(step: str, src: Path, dst: Path, tokenizer_path: Path,
            reports: list[dict[str, float]]) -> float:
    """Run `step` in a fresh process; append its report to `reports` and return the peak RSS of
    its process tree (MB)."""
    shutil.rmtree(dst, ignore_errors=True)
    dst.mkdir(parents=True)
    cmd = [sys.executable, "-m", "bench.memory", "--step", step, "--src", str(src),
           "--dst", str(dst), "--tokenizer", str(tokenizer_path)]
    code, out, peak = run_sampled(cmd, Path(__file__).resolve().parents[1])
    if code:
        raise RuntimeError(f"step {step} failed (exit {code})")
    reports.append(json.loads(out.strip().splitlines()[-1]))
    return peak


def prepare(tmp: Path, tiny: bool) -> tuple[dict[str, Path], Path, float]:
    """Raw Parquet corpora of the books once and ten times over, a tokenizer, and the MB of one."""
    corpus = books(tiny)
    tokenizer_path = tmp / "tokenizer.json"
    train_tokenizer(corpus, tokenizer_path)
    one = write_raw(corpus, tmp / "raw-1x")
    many = tmp / f"raw-{COPIES}x"
    many.mkdir()
    for copy in range(COPIES):
        for path in one:
            shutil.copyfile(path, many / f"{copy:03d}-{path.name}")
    mb = sum(len(d.encode()) for _, docs in corpus for d in docs) / 1e6
    return {"1x": tmp / "raw-1x", f"{COPIES}x": many}, tokenizer_path, mb


def step_main(argv: list[str]) -> None:
    """The measured process: `--step NAME --src DIR --dst DIR [--tokenizer FILE]`. It must not
    import bench.common (torch), whose hundreds of MB would swamp what is measured."""
    p = argparse.ArgumentParser(description="one step, measured by bench.memory")
    p.add_argument("--step", choices=STEPS, required=True)
    p.add_argument("--src", type=Path, required=True)
    p.add_argument("--dst", type=Path, required=True)
    p.add_argument("--tokenizer", type=Path)
    args = p.parse_args(argv)
    run_step(args.step, args.src, args.dst, args.tokenizer)


def main(argv: list[str] | None = None) -> Path | None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--step"]:
        step_main(argv)
        return None
    from bench.common import Table, alternate, median, parser, publish

    args = parser(__doc__.splitlines()[0]).parse_args(argv)
    repeats = 1 if args.tiny else args.repeats
    big = f"{COPIES}x"
    table = Table("memory: peak RSS of the process tree (MB)",
                  ["step", "1x_MB", f"{big}_MB", "growth", "1x_main_MB", f"{big}_main_MB",
                   "1x_worker_MB", f"{big}_worker_MB", f"{big}_seconds"])
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp_dir:
        tmp = Path(tmp_dir)
        raw, tokenizer_path, mb = prepare(tmp, args.tiny)
        for step in STEPS:
            reports: dict[str, list[dict[str, float]]] = {size: [] for size in raw}
            # tokenize reads what clean wrote for the same size
            runs = {size: partial(measure, step,
                                  raw[size] if step == "clean" else tmp / f"clean-{size}",
                                  tmp / f"{step}-{size}", tokenizer_path, reports[size])
                    for size in raw}
            peaks = alternate(runs, repeats)
            one, many = median(peaks["1x"]), median(peaks[big])
            row = {"1x_MB": one, f"{big}_MB": many}
            for size in raw:
                row[f"{size}_main_MB"] = median([r["hwm_mb"] for r in reports[size]])
                row[f"{size}_worker_MB"] = median([r["children_maxrss_mb"] for r in reports[size]])
            table.add(step=step, growth=many / one, **row,
                      **{f"{big}_seconds": median([r["seconds"] for r in reports[big]])})
    table.notes += [
        f"1x: the books, {mb:.2f} MB of raw text; {big}: {COPIES} exact copies of each book; "
        f"both with dedupe off (copies would be dropped as duplicates); median of {repeats}",
        "MB: peak of the summed RSS of the step's process tree, sampled every 20 ms; main: the "
        "step process's own peak (VmHWM); worker: ru_maxrss of its largest child (clean's)",
        f"growth = {big} / 1x; target <= 1.2",
    ]
    settings = {"repeats": repeats, "tiny": args.tiny, "copies": COPIES, "megabytes": mb,
                "dedupe": False}
    return publish([table], args.out, "memory", settings)


if __name__ == "__main__":
    main()
