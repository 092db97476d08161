"""A small run's files, written by hand in the stages' formats, for the report's tests: every
figure here is a literal, so that a test can restate what the report must show."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from gpt1.config import Params, parse_params, read_yaml
from gpt1.presets.edit import _overlay, nest
from gpt1.reporting.files import RunData, RunFiles, read_run
from tasks.paths import RUN_FILES
from tests.conftest import REPO

FILES = RunFiles(**RUN_FILES)
SEEDS = [1, 2, 3]


def params_with(replace: re.Pattern[str] | None = None, **dotted: object) -> Params:
    """The repository's params.yaml with `dotted` keys set (`**{"analysis.seeds": [1]}`),
    mappings merged but those `replace` matches, replaced whole (as a preset sets them)."""
    raw = read_yaml((REPO / "params.yaml").read_text(encoding="utf-8"))
    _overlay(raw, nest(dotted), "", replace)
    return parse_params(raw, REPO / "params.yaml")


# The analysis the fixtures hold; every registry task has a finetune file.
PARAMS = params_with(**{
    "finetune.tasks": list(params_with().tasks),
    "analysis.seeds": SEEDS,
    "analysis.ablation.variants": ["full", "no_pretrain", "no_aux", "lstm"],
    "analysis.ablation.tasks": {"sst2": [1000, None], "story_cloze": [None]},
    "analysis.transfer.tasks": {"rte": None, "story_cloze": None},
    "analysis.zero_shot.tasks": {"sst2": "sentiment", "cola": "acceptability", "race": "choice"},
})
TASKS = PARAMS.tasks

PRETRAIN = {"run": True, "model_type": "gpt1", "steps": 400, "tokens": 1_638_400,
            "train_loss": 4.56789, "val_loss": 4.98765, "val_perplexity": 146.62,
            "unigram_val_loss": 6.54321, "parameters": 5_432_100, "seconds": 120.5,
            "startup_seconds": 2.5, "tokens_per_second": 12345.6, "mfu": 0.1234}
PRETRAIN_LSTM = {"run": True, "model_type": "lstm", "steps": 400, "tokens": 1_638_400,
                 "train_loss": 5.1, "val_loss": 5.4321, "val_perplexity": 228.65,
                 "unigram_val_loss": 6.54321, "parameters": 5_000_000, "seconds": 80.0,
                 "startup_seconds": 0.4, "tokens_per_second": 20000.0, "mfu": 0.05}
NOT_RUN = {"run": False, "reason": "data not found at /data/story_cloze.csv"}


def seed_runs(per_seed: dict[int, dict[str, dict[str, float]]],
              first_epoch: dict[str, dict[str, float]] | None = None) -> list[dict[str, Any]]:
    """A file's `runs`: each seed's last epoch scores `per_seed[seed]` (split -> metric ->
    value); with `first_epoch`, an earlier epoch scoring that, which no aggregate may use."""
    runs = []
    for seed, dev in per_seed.items():
        epochs = [] if first_epoch is None else [
            {"epoch": 1, "train_loss": 0.9, "dev": first_epoch}]
        epochs.append({"epoch": len(epochs) + 1, "train_loss": 0.4 + seed / 100, "dev": dev})
        runs.append({"seed": seed, "steps": 96, "train_loss": 0.41, "seconds": 20.1,
                     "epochs": epochs})
    return runs


def accuracy(*values: float, split: str = "dev") -> dict[int, dict[str, dict[str, float]]]:
    return {seed: {split: {"accuracy": v}} for seed, v in zip(SEEDS, values, strict=True)}


def finetune_file(task: str, per_seed: dict, train: int, eval_examples: dict[str, int],
                  metrics: list[str], majority: dict[str, dict[str, float]] | None = None,
                  first_epoch: dict | None = None,
                  cut: dict[str, tuple[int, float]] | None = None) -> dict[str, Any]:
    """A metrics/finetune/<task>.json as the stage writes it; only what the report reads is
    filled in (the summary keys for `dvc metrics show` are the stage tests' business). `cut`:
    per split, the examples cut to fit n_ctx 512 and their median length (none where absent)."""
    splits = list(eval_examples)
    sizes = {"train": train, **eval_examples}
    truncated = {"n_ctx": 512, "splits": {
        split: {"examples": size, "cut": (cut or {}).get(split, (0, None))[0],
                "median_tokens": (cut or {}).get(split, (0, None))[1]}
        for split, size in sizes.items()}}
    result: dict[str, Any] = {"task": task, "run": True, "split": splits[0]}
    for split in splits:
        block = result if split == splits[0] else result.setdefault(split, {})
        for metric, value in (majority or {}).get(split, {}).items():
            block[f"majority_{metric}"] = value
    return {**result, "train_examples": train, "eval_examples": eval_examples,
            "truncated": truncated, "kept_seed": 2, "metrics": metrics, "seeds": list(per_seed),
            "runs": seed_runs(per_seed, first_epoch)}


# SST-2: epoch 2's accuracies 80.0, 78.5, 81.25 (median 80.0); epoch 1 scored 50 everywhere
SST2 = finetune_file("sst2", accuracy(80.0, 78.5, 81.25), 67349, {"dev": 872}, ["accuracy"],
                     majority={"dev": {"accuracy": 50.92}},
                     first_epoch={"dev": {"accuracy": 50.0}},
                     cut={"train": (12, 540.5), "dev": (1, 530.0)})
MRPC = finetune_file("mrpc", {s: {"dev": {"f1": f, "accuracy": a}}
                              for s, f, a in zip(SEEDS, (80.0, 79.0, 81.0), (70.0, 69.0, 71.0),
                                                 strict=True)},
                     3668, {"dev": 408}, ["f1", "accuracy"],
                     majority={"dev": {"f1": 81.22, "accuracy": 68.38}})
MNLI = finetune_file("mnli", {s: {"dev": {"accuracy": a}, "dev_mismatched": {"accuracy": b}}
                              for s, a, b in zip(SEEDS, (60.0, 59.0, 61.0), (62.0, 61.0, 63.0),
                                                 strict=True)},
                     10000, {"dev": 2000, "dev_mismatched": 2000}, ["accuracy"],
                     majority={"dev": {"accuracy": 35.45}, "dev_mismatched": {"accuracy": 35.22}})
RTE_NOT_RUN = {"task": "rte", "run": False,
               "reason": "data not found at /data/glue/RTE/train.tsv"}
COLA = finetune_file("cola", {s: {"dev": {"mcc": v}} for s, v in zip(SEEDS, (20.0, 25.0, 30.0),
                                                                      strict=True)},
                     8551, {"dev": 1043}, ["mcc"], majority={"dev": {"mcc": 0.0}})
FINETUNE = {"sst2": SST2, "mrpc": MRPC, "mnli": MNLI, "rte": RTE_NOT_RUN, "cola": COLA}


def ablation_file(variant: str, task: str, *sizes: tuple[int | None, int, tuple]) -> dict:
    """(max_train_examples, train_examples, the three seeds' accuracies) per size."""
    keys = [f"train_{'all' if size is None else size}" for size, _, _ in sizes]
    return {"variant": variant, "task": task, "run": True, "sizes": keys,
            **{key: {"max_train_examples": size, "train_examples": train,
                     "eval_examples": {"dev": 872}, "lm_coef": 0.5, "metrics": ["accuracy"],
                     "seeds": SEEDS, "runs": seed_runs(accuracy(*scores))}
               for key, (size, train, scores) in zip(keys, sizes, strict=True)}}


# SST-2 at 1,000 train examples and at all 67,349: each seed's accuracy (median, min, max:
# full 80.1 [79.0, 81.2] and 90.0 [89.5, 90.5]; no_pretrain 60.04 [58.0, 61.0] and 82.0 ...)
SCORES = {"full": ((79.0, 80.1, 81.2), (89.5, 90.0, 90.5)),
          "no_pretrain": ((58.0, 60.04, 61.0), (81.0, 82.0, 83.0)),
          "no_aux": ((78.0, 79.0, 81.5), (90.0, 90.2, 91.0)),
          "lstm": ((69.0, 70.0, 71.0), (87.0, 88.0, 89.0))}
ABLATION = {variant: {"sst2": ablation_file(variant, "sst2", (1000, 1000, capped),
                                            (None, 67349, whole)),
                      "story_cloze": {"variant": variant, "task": "story_cloze", **NOT_RUN}}
            for variant, (capped, whole) in SCORES.items()}

# RTE's medians by layers transferred (k = 0..4); each k's seeds: median - 2, median, median + 1
RTE_MEDIANS = [52.0, 53.5, 54.0, 57.25, 58.5]
TRANSFER = {
    "rte": {"task": "rte", "run": True, "max_train_examples": None, "train_examples": 2490,
            "eval_examples": {"dev": 277}, "lm_coef": 0.5, "metrics": ["accuracy"],
            "seeds": SEEDS, "n_layer": 4,
            **{f"layers_{k}": {"k": k, "runs": seed_runs(accuracy(m - 2, m, m + 1))}
               for k, m in enumerate(RTE_MEDIANS)}},
    "story_cloze": {"task": "story_cloze", **NOT_RUN},
}

STEPS = [0, 10, 30, 100, 300]
ZERO_SHOT = {
    "sst2": {"task": "sst2", "run": True, "heuristic": "sentiment", "metric": "accuracy",
             "split": "dev", "chance": 50.0, "examples": 500,
             "trunks": {"gpt1": {"steps": STEPS, "scores": [50.2, 51.0, 55.0, 60.1, 62.0]},
                        "lstm": {"steps": STEPS, "scores": [50.0, 50.0, 51.0, 52.0, 53.0]}},
             "seconds": 1.0},
    "cola": {"task": "cola", "run": True, "heuristic": "acceptability", "metric": "mcc",
             "split": "dev", "chance": 0.0, "examples": 500, "train_examples": 500,
             "trunks": {"gpt1": {"steps": STEPS, "scores": [0.0, 1.0, 2.5, 4.0, 6.0]},
                        "lstm": {"steps": STEPS, "scores": [0.0, 0.0, 1.0, 1.0, 2.0]}},
             "seconds": 1.0},
    "race": {"task": "race", "run": False, "reason": "data not found at /data/RACE/train/middle"},
}
HELDOUT_BOOK = {"tokens": 123_456, "words": 98_765, "loss": 3.21, "perplexity": 24.78,
                "word_loss": 4.012, "word_perplexity": 55.27, "unigram_loss": 6.5}
LM_EVAL = {"run": True, "files": {"books/kept.txt": HELDOUT_BOOK}, "all": HELDOUT_BOOK,
           "val_loss": 3.1, "unigram_val_loss": 6.4}
GENERATED = {"model": "artifacts/pretrain", "prompt": "The rain fell steadily that evening, and",
             "tokens": 12, "temperature": 0.8, "top_k": 40, "seed": 1234,
             "prompt_as_read": "the rain fell steadily that evening, and",
             "continuation": "she walked down to the harbour <b>alone</b>."}
# (stage, seconds): the records of some stages; the others ran outside DVC
RECORDS = [("ingest", 1.5), ("clean", 12.25), ("pretrain", 120.5), ("finetune@sst2", 30.0),
           ("ablation@full-sst2", 45.0), ("report", 3.0)]
CURVES = {"train": [(0, 9.0), (5, 7.5), (10, 6.0), (15, 5.0), (20, 4.6)],
          "val": [(10, 6.2), (20, 5.0)]}


def _write(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")


def write_run(root: Path, params: Params = PARAMS, lm_eval: dict | None = None) -> None:
    """The fixtures as the stages lay them out under `root`: a file for each stage `params`
    declares (not run where the fixtures have none), stage records, dvclive logs, the text."""
    _write(root / FILES.pretrain, PRETRAIN)
    _write(root / FILES.pretrain_lstm, PRETRAIN_LSTM)
    _write(root / FILES.lm_eval, LM_EVAL if lm_eval is None else lm_eval)
    _write(root / FILES.generated, GENERATED)
    for task in params.tasks:
        _write(root / FILES.finetune / f"{task}.json",
               FINETUNE.get(task, {"task": task, "run": False,
                                   "reason": "not in finetune.tasks"}))
    analysis = params.analysis
    for variant in analysis.ablation.variants:
        for task in analysis.ablation.tasks:
            _write(root / FILES.ablation / variant / f"{task}.json",
                   ABLATION[variant].get(task, {"variant": variant, "task": task, **NOT_RUN}))
    for task in analysis.transfer.tasks:
        _write(root / FILES.transfer / f"{task}.json",
               TRANSFER.get(task, {"task": task, **NOT_RUN}))
    for task in analysis.zero_shot.tasks:
        _write(root / FILES.zero_shot / f"{task}.json",
               ZERO_SHOT.get(task, {"task": task, **NOT_RUN}))
    for i, (stage, seconds) in enumerate(RECORDS):
        name, _, key = stage.partition("@")
        _write(root / FILES.stages / (f"{name}/{key}.json" if key else f"{name}.json"),
               {"stage": stage, "seconds": seconds, "finished": f"2025-01-01T10:0{i}:00+00:00",
                "commit": "0123456789abcdef", "uncommitted_changes": False})
    for split, points in CURVES.items():
        tsv = root / FILES.pretrain_live / "plots" / "metrics" / split / "loss.tsv"
        tsv.parent.mkdir(parents=True, exist_ok=True)
        tsv.write_text("timestamp\tstep\tloss\n"
                       + "".join(f"1700000000\t{s}\t{v}\n" for s, v in points))


def read_fixture_run(root: Path, params: Params = PARAMS) -> RunData:
    write_run(root, params)
    return read_run(params, FILES, root)
