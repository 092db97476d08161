"""The corpus stages at scale: seconds, MB/s and peak memory of ingest, clean, bpe and tokenize on
the bundled sample and on a large corpus, side by side, with clean and tokenize run again on a
local Dask cluster and their outputs compared byte for byte.

Each stage runs as `dvc repro` runs it, `python -m tasks.<stage>` in a scratch checkout whose
params.yaml points ingest at the corpus, while this process samples the summed resident memory
of the stage's process tree (workers and Dask's processes included) every 20 ms. The large
corpus is ../shared/data's `corpus/**/*.txt` and `books/*.txt` (136.6 MB of e-texts).
Ingest reads one task (finetune.tasks: [sst2]) so that its figure is the corpus's.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench.memory import run_sampled
from gpt1.corpus.books import corpus_files
from gpt1.presets.edit import apply_preset, nest, update_params

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "gpt1" / "sample_data"
BIG_CORPUS = ["corpus/**/*.txt", "books/*.txt"]
STAGES = ("ingest", "clean", "bpe", "tokenize")
DISTRIBUTED = ("clean", "tokenize")  # the stages that take the executor
OUTPUT = {"ingest": "data/raw", "clean": "data/clean", "bpe": "artifacts/bpe",
          "tokenize": "data/shards"}
DASK = {"executor.kind": "dask", "executor.workers": 2}
LOCAL = {"executor.kind": "local", "executor.workers": 0}
# a short pretraining run of the books preset's model on each corpus's shards, timed per step
PRETRAIN_STEPS = 40
TINY_PRETRAIN_STEPS = 3


def pretrain_probe(steps: int) -> dict[str, object]:
    """The knobs of a `steps`-step pretraining run, evaluated and checkpointed at its end."""
    return {"pretrain.max_steps": steps, "pretrain.warmup_steps": min(4, steps - 1),
            "pretrain.eval_every": steps, "pretrain.eval_batches": 2,
            "pretrain.checkpoint_every": steps, "pretrain.snapshots": [0],
            "pretrain.peak_tflops": 1.0, "pretrain.device": "cpu"}


def digest(folder: Path) -> str:
    """One SHA-256 over every file's relative path and bytes."""
    sha = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        sha.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes())
    return sha.hexdigest()


def text_mb(folder: Path) -> float:
    """MB of UTF-8 text in the `text` column of the Parquet files under `folder`."""
    return sum(pc.sum(pc.binary_length(pq.read_table(p, columns=["text"]).column(0))).as_py()
               for p in folder.glob("*.parquet")) / 1e6


def run_stage(stage: str, checkout: Path) -> tuple[float, float]:
    """Run one stage in `checkout`; its seconds and the peak RSS of its process tree (MB)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    start = time.perf_counter()
    code, log, peak = run_sampled([sys.executable, "-m", f"tasks.{stage}"], checkout, env,
                                  with_stderr=True)
    if code:
        raise RuntimeError(f"stage {stage} failed (exit {code}):\n{log[-3000:]}")
    return time.perf_counter() - start, peak


def measure(root: Path, corpus: list[str], checkout: Path, steps: int) -> dict:
    """Every corpus stage on `corpus` under `root` (the books preset), clean and tokenize again
    on Dask, then `steps` pretraining steps on the shards."""
    checkout.mkdir(parents=True)
    shutil.copyfile(REPO / "params.yaml", checkout / "params.yaml")
    apply_preset("books", checkout / "params.yaml")
    update_params(checkout / "params.yaml", nest({
        "ingest.root": str(root.resolve()), "ingest.corpus": corpus,
        "finetune.tasks": ["sst2"], **LOCAL}))
    files = corpus_files(root, corpus, "ingest.corpus")
    raw_mb = sum(f.stat().st_size for f in files) / 1e6
    runs: dict[str, dict] = {}
    for stage in STAGES:
        seconds, peak = run_stage(stage, checkout)
        source = {"ingest": None, "clean": "data/raw/corpus"}.get(stage, "data/clean")
        mb = raw_mb if source is None else text_mb(checkout / source)
        runs[stage] = {"seconds": seconds, "peak_mb": peak, "mb": mb,
                       "digest": digest(checkout / OUTPUT[stage])}
    update_params(checkout / "params.yaml", nest(DASK))
    for stage in DISTRIBUTED:
        seconds, peak = run_stage(stage, checkout)
        runs[f"{stage} (dask)"] = {"seconds": seconds, "peak_mb": peak, "mb": runs[stage]["mb"],
                                   "digest": digest(checkout / OUTPUT[stage])}
    update_params(checkout / "params.yaml", nest(pretrain_probe(steps)))
    run_stage("pretrain", checkout)
    pretrained = json.loads((checkout / "metrics/pretrain.json").read_text())
    manifest = json.loads((checkout / "data/shards/manifest.json").read_text())
    splits = {split: {"documents": s["documents"], "tokens": s["tokens"],
                      "shards": len(s["shards"])} for split, s in manifest["splits"].items()}
    return {"files": len(files), "raw_mb": raw_mb, "runs": runs, "splits": splits,
            "pretrain": pretrained}


def main(argv: list[str] | None = None) -> Path:
    from bench.common import DATA, Table, parser, publish

    args = parser(__doc__.splitlines()[0]).parse_args(argv)
    small = (SAMPLE, ["corpus/01_*.txt"] if args.tiny else ["corpus/**/*.txt"])
    big = (SAMPLE, ["corpus/0[1-2]_*.txt"]) if args.tiny else (DATA, BIG_CORPUS)
    steps = TINY_PRETRAIN_STEPS if args.tiny else PRETRAIN_STEPS
    with tempfile.TemporaryDirectory(prefix="bench-corpus-") as tmp:
        results = {name: measure(root, corpus, Path(tmp) / name, steps)
                   for name, (root, corpus) in (("small", small), ("big", big))}
    stages = Table("corpus stages: the bundled sample (small) and the large corpus (big)",
                   ["stage", "small_seconds", "small_peak_MB", "big_MB", "big_seconds",
                    "big_MB_per_s", "big_peak_MB", "peak_growth", "same_bytes_as_local"])
    for name, big_run in results["big"]["runs"].items():
        small_run = results["small"]["runs"][name]
        local = results["big"]["runs"][name.removesuffix(" (dask)")]
        same = None if local is big_run else big_run["digest"] == local["digest"]
        stages.add(stage=name, small_seconds=small_run["seconds"],
                   small_peak_MB=small_run["peak_mb"], big_MB=big_run["mb"],
                   big_seconds=big_run["seconds"], big_MB_per_s=big_run["mb"] / big_run["seconds"],
                   big_peak_MB=big_run["peak_mb"],
                   peak_growth=big_run["peak_mb"] / small_run["peak_mb"],
                   same_bytes_as_local=same)
    stages.notes += [
        f"small: {results['small']['files']} files, {results['small']['raw_mb']:.1f} MB; big: "
        f"{results['big']['files']} files, {results['big']['raw_mb']:.1f} MB "
        f"({' + '.join(big[1])} under {big[0]})",
        "MB: ingest's raw files; clean's raw document text; bpe's and tokenize's clean text",
        "peak: the summed RSS of the stage's process tree, sampled every 20 ms; growth = big / "
        "small. Local: executor.workers 0 (a process per core); dask: a local cluster of 2",
        "same_bytes_as_local (Dask rows): the stage's output folder hashed file by file against "
        "the local run's",
    ]
    tokens = Table("the large corpus's shards (data/shards/manifest.json)",
                   ["split", "documents", "tokens", "shards"])
    for split, counts in results["big"]["splits"].items():
        tokens.add(split=split, **counts)
    pretraining = Table(f"pretraining on each corpus's shards: {steps} steps of the books "
                        "preset's model", ["corpus", "train_tokens", "train_shards",
                                           "seconds_per_step", "tokens_per_s",
                                           "step_time_vs_small"])
    per_step = {name: r["pretrain"]["seconds"] / r["pretrain"]["steps"]
                for name, r in results.items()}
    for name, r in results.items():
        pretraining.add(corpus=name, train_tokens=r["splits"]["train"]["tokens"],
                        train_shards=r["splits"]["train"]["shards"],
                        seconds_per_step=per_step[name],
                        tokens_per_s=r["pretrain"]["tokens_per_second"],
                        step_time_vs_small=per_step[name] / per_step["small"])
    pretraining.notes.append("the loader memory-maps the shards and checks their sha256 once, at "
                             "the start: a step reads its batch's windows alone, whatever the "
                             "corpus size")
    settings = {"tiny": args.tiny, "pretrain_steps": steps, "small": [str(small[0]), small[1]],
                "big": [str(big[0]), big[1]]}
    return publish([stages, tokens, pretraining], args.out, "corpus", settings)


if __name__ == "__main__":
    main()
