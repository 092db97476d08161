"""The bad-input catalogue: each way a user's input or environment can be wrong, run through the
command a user types, must end in exit code 2 and one message naming the file, line or key at
fault, with no traceback, and leave every output already produced as it was.

One tiny pipeline is produced once (ingest -> pretrain on the bundled sample, stage by stage);
each case breaks a copy of it and runs one command there.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpt1.config import read_yaml
from tests.conftest import built_once, copy_repo, edit_params, run

pytestmark = pytest.mark.heavy  # the whole catalogue, a CLI run or a stage each

SAMPLE = Path("gpt1/sample_data")
UNWATCHED = {".git", ".dvc", "__pycache__"}  # git's and DVC's own state, Python's caches


def _stage(name: str) -> list[str]:
    return [sys.executable, "-m", f"tasks.{name}"]


def _gpt1(*args: str) -> list[str]:
    return [sys.executable, "-m", "gpt1.cli", *args]


@pytest.fixture(scope="session")
def pipeline(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """A checkout on the tiny preset with the outputs of ingest .. pretrain (one sample book,
    SST-2, STS-B and Story Cloze), run as DVC would run them, stage by stage; built once for
    the test run (`built_once`), every case breaking a copy."""

    def build(folder: Path) -> None:
        repo = copy_repo(folder / "repo")
        run(_gpt1("preset", "tiny"), repo)
        edit_params(repo, **{"ingest.corpus": ["corpus/01_*.txt"], "tokenize.val_every": 4,
                             "finetune.tasks": ["sst2", "stsb", "story_cloze"]})
        for stage in ("ingest", "clean", "bpe", "tokenize", "pretrain"):
            run(_stage(stage), repo)

    return built_once(tmp_path_factory, worker_id, "catalogue", build) / "repo"


def _snapshot(repo: Path) -> dict[str, str]:
    """Every file of the checkout (outputs, params.yaml, data, anything a user put there) with
    its sha256; and every folder, so that a temporary one left behind shows."""
    files = {}
    for path in sorted(repo.rglob("*")):
        rel = path.relative_to(repo)
        if UNWATCHED & set(rel.parts):
            continue
        files[rel.as_posix()] = (hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file()
                                 else "folder")
    return files


# -- ways to break a checkout ----------------------------------------------------------------


def _set(**changes: object) -> Callable[[Path], None]:
    """Write params.yaml keys directly (as an editor would: `gpt1 set` would refuse them)."""

    def setup(repo: Path) -> None:
        path = repo / "params.yaml"
        raw = read_yaml(path.read_text())
        for dotted, value in changes.items():
            *parents, leaf = dotted.split(".")
            node = raw
            for part in parents:
                node = node[part]
            node[leaf] = value
        path.write_text(json.dumps(raw, indent=2))  # JSON is YAML 1.2

    return setup


def _append(rel: str, text: str) -> Callable[[Path], None]:
    def setup(repo: Path) -> None:
        with (repo / rel).open("a", encoding="utf-8") as fh:
            fh.write(text)

    return setup


def _write(rel: str, data: str | bytes) -> Callable[[Path], None]:
    def setup(repo: Path) -> None:
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, bytes):
            path.write_bytes(data)
        else:
            path.write_text(data, encoding="utf-8")

    return setup


def _keep_lines(rel: str, count: int) -> Callable[[Path], None]:
    """Keep the first `count` lines of a file (1: a header alone)."""

    def setup(repo: Path) -> None:
        path = repo / rel
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        path.write_text("".join(lines[:count]), encoding="utf-8")

    return setup


def _replace_in(rel: str, old: str, new: str) -> Callable[[Path], None]:
    def setup(repo: Path) -> None:
        path = repo / rel
        text = path.read_text(encoding="utf-8")
        assert old in text, f"{old!r} not in {rel}"
        path.write_text(text.replace(old, new, 1), encoding="utf-8")

    return setup


def _remove(rel: str) -> Callable[[Path], None]:
    def setup(repo: Path) -> None:
        path = repo / rel
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()

    return setup


def _truncate(rel: str, keep: int) -> Callable[[Path], None]:
    def setup(repo: Path) -> None:
        path = repo / rel
        path.write_bytes(path.read_bytes()[:keep])

    return setup


def _flip_byte(rel: str) -> Callable[[Path], None]:
    """Overwrite one byte in the middle of a file: same size, other content."""

    def setup(repo: Path) -> None:
        path = repo / rel
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))

    return setup


def _both(*setups: Callable[[Path], None]) -> Callable[[Path], None]:
    def setup(repo: Path) -> None:
        for step in setups:
            step(repo)

    return setup


def _nothing(repo: Path) -> None:
    """The command's arguments alone are wrong."""


def _hf_dir(repo: Path) -> None:
    """`hf/`: the pretrained model as a HuggingFace openai-gpt directory."""
    from gpt1.interop.hf import export_hf

    export_hf(repo / "artifacts/pretrain", repo / "hf")


def _edit_json(rel: str, **changes: object) -> Callable[[Path], None]:
    def setup(repo: Path) -> None:
        path = repo / rel
        path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))

    return setup


def _pickled_model(repo: Path) -> None:
    """`hf/pytorch_model.bin` a pickle of a whole module: loading it would run its code."""
    import torch

    from gpt1.model.registry import load_model

    (repo / "hf/model.safetensors").unlink()
    torch.save(load_model(repo / "artifacts/pretrain"), repo / "hf/pytorch_model.bin")


SST2_TRAIN = f"{SAMPLE}/glue/SST-2/train.tsv"
SST2_DEV = f"{SAMPLE}/glue/SST-2/dev.tsv"
STSB_TRAIN = f"{SAMPLE}/glue/STS-B/train.tsv"
CLOZE = f"{SAMPLE}/multiple_choice/story_cloze/cloze_test_val__spring2016.csv"
BOOK = f"{SAMPLE}/corpus/01_the_lantern_at_greywater.txt"
TRAIN_SHARD = "data/shards/train/00000.arrow"
MANIFEST = "data/shards/manifest.json"
SST2_STATUS = "data/raw/tasks/sst2/status.json"
STSB_ROW = "\t".join(["60", "main-captions", "MSRvid", "2012train", "0060", "none", "none",
                      "A man plays a flute.", "A man is playing a flute.", "{score}"]) + "\n"
DUPLICATE_KEY = "model:\n  n_ctx: 64\n"
BROKEN_YAML = "ingest:\n  corpus: [a.txt\n"
MODEL = "artifacts/pretrain"
GENERATE = _gpt1("generate", "--model", MODEL, "--prompt", "the lantern")
EXPORT = ("export-hf", "--model", MODEL)
IMPORT = ("import-hf", "--hf", "hf")


@dataclass(frozen=True)
class Case:
    id: str
    setup: Callable[[Path], None]
    command: list[str]
    names: str  # what the message must name: the file (and line) or the params key


CASES = [
    # -- params.yaml, through `gpt1 set` / `gpt1 preset` (which write nothing when refused) ---
    Case("set-unknown-device", _nothing, _gpt1("set", "pretrain.device=tpu"),
         "pretrain.device: 'tpu' is not a device"),
    Case("set-unknown-finetune-device", _nothing, _gpt1("set", "finetune.train.device=gpu"),
         "finetune.train.device: 'gpu' is not a device"),
    Case("set-warmup-beyond-max-steps", _nothing, _gpt1("set", "pretrain.warmup_steps=500"),
         "pretrain.warmup_steps: 500 is more than max_steps (20)"),
    Case("set-corpus-outside-root", _nothing, _gpt1("set", "ingest.corpus=[../extra/*.txt]"),
         "ingest.corpus.0: '../extra/*.txt' must be a relative path inside ingest.root"),
    Case("set-corpus-absolute", _nothing, _gpt1("set", "ingest.corpus=[/etc/*.conf]"),
         "ingest.corpus.0: '/etc/*.conf' must be a relative path inside ingest.root"),
    Case("set-task-file-outside-root", _nothing,
         _gpt1("set", "tasks.sst2.files.train=../../x.tsv"), "tasks.sst2.files.train:"),
    Case("set-heads-not-dividing-width", _nothing, _gpt1("set", "model.n_head=3"),
         "model: n_embd (32) must be divisible by n_head (3)"),
    Case("set-unknown-key", _nothing, _gpt1("set", "pretrain.learning_rate=0.1"),
         "params key pretrain.learning_rate does not exist"),
    Case("set-without-value", _nothing, _gpt1("set", "model.n_ctx"),
         "expected KEY=VALUE"),
    Case("set-negative-lr", _nothing, _gpt1("set", "pretrain.lr=-1"), "pretrain.lr:"),
    Case("set-unknown-task", _nothing, _gpt1("set", "finetune.tasks=[imdb]"),
         "finetune.tasks: ['imdb'] are not in the task registry"),
    Case("set-corpus-a-folder", _nothing, _gpt1("set", "ingest.corpus=[.]"), "ingest.corpus"),
    Case("set-corpus-bad-double-star", _nothing, _gpt1("set", "ingest.corpus=[corpus/**.txt]"),
         "ingest.corpus"),
    Case("set-heldout-a-folder", _nothing, _gpt1("set", "lm_eval.files=[corpus/]"),
         "lm_eval.files"),
    Case("set-key-inside-a-number", _nothing, _gpt1("set", "model.n_ctx.x=5"),
         "params key model.n_ctx.x: model.n_ctx is 32, not a mapping"),
    Case("set-key-inside-a-path", _nothing, _gpt1("set", "tasks.sst2.files.train.glue=1"),
         "params key tasks.sst2.files.train.glue: tasks.sst2.files.train is"),
    Case("set-bad-override", _nothing, _gpt1("set", "tasks.sst2.overrides={lr: fast}"),
         "tasks.sst2.overrides.lr:"),
    Case("preset-unknown", _nothing, _gpt1("preset", "huge"), "unknown preset 'huge'"),
    Case("set-on-broken-yaml", _append("params.yaml", BROKEN_YAML), _gpt1("set", "model.n_ctx=64"),
         "params.yaml:"),
    Case("preset-on-duplicate-key", _append("params.yaml", DUPLICATE_KEY),
         _gpt1("preset", "tiny"), 'found duplicate key "model"'),
    # -- params.yaml as a stage reads it --
    Case("stage-duplicate-key", _append("params.yaml", DUPLICATE_KEY), _stage("ingest"),
         'found duplicate key "model"'),
    Case("stage-broken-yaml", _append("params.yaml", BROKEN_YAML), _stage("clean"),
         "params.yaml:"),
    Case("stage-params-missing", _remove("params.yaml"), _stage("bpe"),
         "params.yaml: not found"),
    Case("stage-device-tpu", _set(**{"pretrain.device": "tpu"}), _stage("pretrain"),
         "pretrain.device: 'tpu' is not a device"),
    Case("stage-warmup-beyond-max-steps", _set(**{"pretrain.warmup_steps": 50}),
         _stage("pretrain"), "pretrain.warmup_steps: 50 is more than max_steps (20)"),
    # -- ingest: the data root and corpus --
    Case("root-missing", _set(**{"ingest.root": "no/such/folder"}), _stage("ingest"),
         "ingest.root: data root no/such/folder is not a directory"),
    Case("corpus-matches-nothing", _set(**{"ingest.corpus": ["books/*.txt"]}), _stage("ingest"),
         "matches ingest.corpus ['books/*.txt']"),
    # -- lm_eval: held-out text must be held out ------------------------------------------------
    Case("heldout-is-pretraining-text",
         _set(**{"lm_eval.files": ["corpus/01_the_lantern_at_greywater.txt"]}), _stage("lm_eval"),
         "lm_eval.files: ['corpus/01_the_lantern_at_greywater.txt'] are pretraining text"),
    Case("heldout-matches-nothing", _set(**{"lm_eval.files": ["kept/*.txt"]}), _stage("lm_eval"),
         "matches lm_eval.files ['kept/*.txt']"),
    Case("heldout-outside-root", _set(**{"lm_eval.files": ["../secret.txt"]}), _stage("lm_eval"),
         "lm_eval.files.0: '../secret.txt' must be a relative path inside ingest.root"),
    Case("book-not-utf8", _write(BOOK, b"It was a dark \xff night.\n"), _stage("ingest"),
         f"{BOOK}:1: not UTF-8 text"),
    Case("task-without-data", _set(**{"finetune.tasks": ["sst2", "qnli"]}), _stage("ingest"),
         "task qnli (in finetune.tasks): data not found at "),
    # -- ingest: task files --
    Case("train-header-only", _keep_lines(SST2_TRAIN, 1), _stage("ingest"), SST2_TRAIN),
    Case("dev-header-only", _keep_lines(SST2_DEV, 1), _stage("ingest"), SST2_DEV),
    Case("tsv-not-utf8", _write(SST2_TRAIN, b"sentence\tlabel\nfine \xe9t\xe9\t1\n"),
         _stage("ingest"), f"{SST2_TRAIN}:2"),
    Case("label-not-in-labels", _append(SST2_TRAIN, "a fine film .\t2\n"), _stage("ingest"),
         f"{SST2_TRAIN}:2002"),
    Case("row-missing-a-column", _append(SST2_TRAIN, "a fine film .\n"), _stage("ingest"),
         f"{SST2_TRAIN}:2002"),
    Case("stsb-score-above-5", _append(STSB_TRAIN, STSB_ROW.format(score="7.5")),
         _stage("ingest"), f"{STSB_TRAIN}:62"),
    Case("stsb-score-negative", _append(STSB_TRAIN, STSB_ROW.format(score="-40")),
         _stage("ingest"), f"{STSB_TRAIN}:62"),
    Case("stsb-score-huge", _append(STSB_TRAIN, STSB_ROW.format(score="1e9")), _stage("ingest"),
         f"{STSB_TRAIN}:62"),
    Case("stsb-score-nan", _append(STSB_TRAIN, STSB_ROW.format(score="nan")), _stage("ingest"),
         f"{STSB_TRAIN}:62"),
    Case("stsb-score-not-a-number", _append(STSB_TRAIN, STSB_ROW.format(score="high")),
         _stage("ingest"), f"{STSB_TRAIN}:62"),
    Case("cloze-fewer-rows-than-holdout", _keep_lines(CLOZE, 101), _stage("ingest"),
         "tasks.story_cloze.holdout.size"),
    Case("cloze-answer-out-of-range",
         _replace_in(CLOZE, "Barnaby gave the candle to Hester.,1", "Barnaby gave the candle "
                     "to Hester.,3"), _stage("ingest"), f"{CLOZE}:2"),
    # -- tokenize and pretrain: their inputs --
    Case("tokenizer-missing", _remove("artifacts/bpe/tokenizer.json"), _stage("tokenize"),
         "artifacts/bpe/tokenizer.json"),
    Case("shard-overwritten", _flip_byte(TRAIN_SHARD), _stage("pretrain"),
         f"{TRAIN_SHARD}: contents differ from the sha256 in data/shards/manifest.json"),
    Case("manifest-truncated", _truncate(MANIFEST, 300), _stage("pretrain"),
         f"{MANIFEST}: damaged, not the JSON stage tokenize writes"),
    Case("shard-missing", _remove(TRAIN_SHARD), _stage("pretrain"),
         "data/shards/train: shards differ from data/shards/manifest.json"),
    Case("shard-extra", _write("data/shards/train/00009.arrow", b"junk"), _stage("pretrain"),
         "data/shards/train: shards differ from data/shards/manifest.json"),
    Case("context-too-large-for-memory", _set(**{"model.n_ctx": 100_000_000}),
         _stage("pretrain"), "model and pretrain.batch_size: training needs at least"),
    Case("cuda-without-a-gpu", _set(**{"pretrain.device": "cuda"}), _stage("pretrain"),
         "device 'cuda' requested but CUDA is not available"),
    # -- model directories: generate, export-hf, import-hf, import-openai -----------------------
    Case("generate-config-not-json", _write(f"{MODEL}/config.json", "{n_ctx: 32"), GENERATE,
         f"{MODEL}/config.json: not JSON"),
    Case("generate-config-not-the-weights", _edit_json(f"{MODEL}/config.json", n_embd=64),
         GENERATE, f"{MODEL}/model.safetensors: "),
    Case("generate-config-missing-key", _write(f"{MODEL}/config.json", '{"vocab_size": 504}'),
         GENERATE, f"{MODEL}/config.json: missing keys"),
    Case("generate-weights-cut-short", _truncate(f"{MODEL}/model.safetensors", 200), GENERATE,
         f"{MODEL}/model.safetensors: not a readable safetensors file"),
    Case("generate-tokenizer-garbled", _write(f"{MODEL}/tokenizer.json", "{oops"), GENERATE,
         f"{MODEL}/tokenizer.json: not a tokenizer file"),
    Case("generate-no-model", _nothing, _gpt1("generate", "--model", "nowhere", "--prompt", "a"),
         "nowhere/"),
    Case("export-onto-a-file", _write("notes.txt", "mine"),
         _gpt1(*EXPORT, "--out", "notes.txt"), "notes.txt: exists and is not a directory"),
    Case("export-onto-a-folder-of-mine", _write("mine/notes.txt", "mine"),
         _gpt1(*EXPORT, "--out", "mine"), "mine: holds notes.txt, which this command does not"),
    Case("export-inside-a-stage-output", _nothing,
         _gpt1(*EXPORT, "--out", "artifacts/pretrain/hf"),
         "--out artifacts/pretrain/hf: inside artifacts/pretrain, an output of stage pretrain"),
    Case("export-onto-artifacts", _nothing, _gpt1(*EXPORT, "--out", "artifacts"),
         "artifacts: holds bpe, checkpoints, pretrain"),
    Case("import-onto-artifacts", _hf_dir, _gpt1(*IMPORT, "--out", "artifacts"),
         "artifacts: holds bpe, checkpoints, pretrain"),
    Case("import-pickled-model", _both(_hf_dir, _pickled_model), _gpt1(*IMPORT, "--out", "m"),
         "hf/pytorch_model.bin: torch.load(weights_only=True) refuses it"),
    Case("import-weights-cut-short", _both(_hf_dir, _truncate("hf/model.safetensors", 300)),
         _gpt1(*IMPORT, "--out", "m"), "hf/model.safetensors: not a readable safetensors file"),
    Case("import-other-architecture", _both(_hf_dir, _edit_json("hf/config.json",
                                                                 model_type="gpt2")),
         _gpt1(*IMPORT, "--out", "m"), "hf/config.json: model_type 'gpt2'"),
    Case("import-openai-no-release", _nothing,
         _gpt1("import-openai", "--release", "nowhere", "--out", "m"), "nowhere/"),
    # -- finetune --
    Case("task-status-emptied", _write(SST2_STATUS, ""), [*_stage("finetune"), "--task", "sst2"],
         f"{SST2_STATUS}: damaged, not the JSON stage ingest writes"),
    Case("finetune-without-pretrained-model", _remove("artifacts/pretrain"),
         [*_stage("finetune"), "--task", "sst2"],
         "artifacts/pretrain/config.json: not found (run the pretrain stage first)"),
    # -- params: names, numbers, bounds --
    Case("stage-task-name-shell-injection",
         _replace_in("params.yaml", "\n  sst2:\n", "\n  'x;touch PWNED;y':\n"), _stage("ingest"),
         "params.yaml: tasks.'x;touch PWNED;y': a task name is 1 to 64 letters, digits and _"),
    Case("stage-task-name-climbs-out",
         _replace_in("params.yaml", "\n  sst2:\n", "\n  '../../../escaped':\n"), _stage("ingest"),
         "params.yaml: tasks.'../../../escaped': a task name is"),
    Case("stage-task-name-with-space", _replace_in("params.yaml", "\n  sst2:\n", "\n  my task:\n"),
         [*_stage("finetune"), "--task", "my task"],
         "params.yaml: tasks.'my task': a task name is"),
    Case("set-task-name-shell-injection", _nothing,
         _gpt1("set", "finetune.tasks=['x;touch PWNED;y']"),
         "params.yaml: finetune.tasks.0: a task name is"),
    Case("set-lr-true", _nothing, _gpt1("set", "pretrain.lr=true"),
         "pretrain.lr: Input should be a valid number (got True)"),
    Case("set-n-layer-true", _nothing, _gpt1("set", "model.n_layer=true"),
         "model.n_layer: Input should be a valid integer (got True)"),
    Case("set-seed-true", _nothing, _gpt1("set", "pretrain.seed=true"),
         "pretrain.seed: Input should be a valid integer (got True)"),
    Case("set-override-epochs-true", _nothing, _gpt1("set", "tasks.sst2.overrides={epochs: true}"),
         "tasks.sst2.overrides.epochs: Input should be a valid integer (got True)"),
    Case("set-seed-huge", _nothing, _gpt1("set", "pretrain.seed=100000000000000000000000"),
         "pretrain.seed: Input should be less than 4294967296"),
    Case("set-finetune-seed-negative", _nothing, _gpt1("set", "finetune.seeds=[-1]"),
         "finetune.seeds.0: Input should be greater than or equal to 0"),
    Case("set-retry-delay-inf", _nothing, _gpt1("set", "flows.retry_delay_seconds=.inf"),
         "flows.retry_delay_seconds: Input should be a finite number (got inf)"),
    Case("stage-seed-huge", _set(**{"pretrain.seed": 10**23}), _stage("pretrain"),
         "pretrain.seed: Input should be less than 4294967296"),
    Case("stage-n-layer-true", _set(**{"model.n_layer": True}), _stage("pretrain"),
         "model.n_layer: Input should be a valid integer (got True)"),
    Case("generate-seed-huge", _nothing, [*GENERATE, "--seed", "100000000000000000000000"],
         "Invalid value for '--seed'"),
    # -- team server, Prefect, Dask --
    Case("team-auth-file-empty", _write("auth", ""),
         _gpt1("team", "env", "--url", "http://127.0.0.1:4310", "--auth-file", "auth"),
         "--auth-file auth: empty, and an empty auth string lets anyone in"),
    Case("team-auth-file-short-secret", _write("auth", "gpt1:short\n"),
         _gpt1("team", "env", "--url", "http://127.0.0.1:4310", "--auth-file", "auth"),
         "--auth-file auth: not one line `user:secret`"),
    Case("team-auth-file-others-read", _both(_write("auth", "gpt1:" + "x" * 32 + "\n"),
                                             lambda repo: (repo / "auth").chmod(0o644)),
         _gpt1("team", "env", "--url", "http://127.0.0.1:4310", "--auth-file", "auth"),
         "--auth-file auth: open to group or others (mode 0644), and it holds the team "
         "server's password: chmod 600 auth"),
    Case("team-auth-file-a-folder", _nothing,
         _gpt1("team", "env", "--url", "http://127.0.0.1:4310", "--auth-file", "metrics"),
         "--auth-file metrics: is a directory"),
    Case("flow-unknown-argument", _nothing, [sys.executable, "-m", "flows.full_pipeline",
                                             "--force"],
         "python -m flows.full_pipeline: error: unrecognized arguments: --force"),
    Case("flow-unknown-task", _nothing, [sys.executable, "-m", "flows.finetune", "nonexistent"],
         "task 'nonexistent': not in the task registry of params.yaml"),
    Case("flow-server-unreachable", _nothing,
         ["env", "PREFECT_API_URL=http://127.0.0.1:1/api", sys.executable, "-m",
          "flows.full_pipeline"],
         "PREFECT_API_URL=http://127.0.0.1:1/api: no Prefect server answers there"),
    Case("dask-scheduler-not-answering",
         _set(**{"executor.kind": "dask", "executor.address": "tcp://127.0.0.1:1"}),
         _stage("clean"), "executor.address: no Dask scheduler answers at tcp://127.0.0.1:1"),
    Case("dask-address-without-port",
         _set(**{"executor.kind": "dask", "executor.address": "scheduler-host"}),
         _stage("clean"), "executor.address: 'scheduler-host' is not the address of a Dask"),
    # -- editing params.yaml, folders a command writes, imports --
    Case("set-read-only-params", lambda repo: (repo / "params.yaml").chmod(0o444),
         _gpt1("set", "pretrain.seed=3"), "params.yaml: read-only (mode 0444)"),
    Case("preset-through-a-dangling-link",
         _both(_remove("params.yaml"),
               lambda repo: (repo / "params.yaml").symlink_to("shared/params.yaml")),
         _gpt1("preset", "tiny"), "params.yaml: a link to shared/params.yaml, which is not found"),
    Case("export-force-onto-artifacts", _nothing,
         _gpt1(*EXPORT, "--out", "artifacts", "--force"),
         "lie inside it; refusing to replace it, even with --force"),
    Case("import-force-onto-the-checkout", _hf_dir, _gpt1(*IMPORT, "--out", ".", "--force"),
         "--out .: the root of the repository at"),
    Case("export-force-above-the-checkout", _nothing, _gpt1(*EXPORT, "--out", "..", "--force"),
         "--out ..: holds the repository at"),
    Case("export-force-into-git", _nothing, _gpt1(*EXPORT, "--out", ".git/hf", "--force"),
         "git's own state; refusing to write there, even with --force"),
    Case("import-openai-force-onto-dvc-cache", _nothing,
         _gpt1("import-openai", "--release", "nowhere", "--out", ".dvc/cache", "--force"),
         "DVC's own state and cache; refusing to write there, even with --force"),
    # -- internal files, verdicts, temporaries --
    Case("manifest-empty-object", _write(MANIFEST, "{}"), _stage("pretrain"),
         f"{MANIFEST}: damaged, not the JSON stage tokenize writes (vocab_size: Field required"),
    Case("manifest-a-list", _write(MANIFEST, "[]"), _stage("pretrain"),
         f"{MANIFEST}: damaged, not the JSON stage tokenize writes (a list, not a JSON object); "
         "run `dvc repro --force tokenize` to write it again"),
    Case("manifest-null", _write(MANIFEST, "null"), _stage("pretrain"),
         f"{MANIFEST}: damaged, not the JSON stage tokenize writes (null, not a JSON object)"),
    Case("pretrain-metrics-empty-object", _write("metrics/pretrain.json", "{}"),
         _stage("report"), "metrics/pretrain.json: damaged, not the JSON stage pretrain writes "
                           "(run: Field required); run `dvc repro --force pretrain`"),
    Case("pretrain-metrics-null-for-lm-eval",
         _both(_set(**{"lm_eval.files": ["corpus/02_*.txt"]}),
               _write("metrics/pretrain.json", "null")), _stage("lm_eval"),
         "metrics/pretrain.json: damaged, not the JSON stage pretrain writes (null, not a JSON "
         "object)"),
    Case("task-status-null", _write(SST2_STATUS, "null"), [*_stage("finetune"), "--task", "sst2"],
         f"{SST2_STATUS}: damaged, not the JSON stage ingest writes (null, not a JSON object); "
         "run `dvc repro --force ingest` to write it again"),
    Case("task-status-a-list", _write(SST2_STATUS, "[]"),
         [*_stage("ablation"), "--variant", "full", "--task", "sst2"],
         f"{SST2_STATUS}: damaged, not the JSON stage ingest writes (a list, not a JSON object)"),
    Case("task-status-without-rows", _write(SST2_STATUS, '{"run": true}'),
         [*_stage("zero_shot"), "--task", "sst2"],
         f"{SST2_STATUS}: damaged, not the JSON stage ingest writes (rows: Field required)"),
]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_input_is_one_line_naming_the_fault(pipeline: Path, tmp_path: Path,
                                                case: Case) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(pipeline, repo, symlinks=True)
    case.setup(repo)
    before = _snapshot(repo)
    proc = run(case.command, repo, check=False)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 2, output
    assert case.names in proc.stderr, output
    assert "Traceback" not in output, output
    assert "weights_only=False" not in output  # never advise loading untrusted pickles
    assert _snapshot(repo) == before, "outputs or params.yaml changed"


def test_the_catalogue_is_long_enough() -> None:
    assert len(CASES) >= 40
    assert len({case.id for case in CASES}) == len(CASES)


def test_the_pipeline_it_breaks_is_whole(pipeline: Path) -> None:
    """Each case starts from real outputs: a model, shards with their manifest, task tables."""
    assert (pipeline / "artifacts/pretrain/model.safetensors").is_file()
    manifest = json.loads((pipeline / "data/shards/manifest.json").read_text())
    assert manifest["splits"]["val"]["tokens"] > 0
    status = json.loads((pipeline / "data/raw/tasks/sst2/status.json").read_text())
    assert status["run"] and status["rows"]["train"] == 2000


# -- documented behaviour and faults ---------------------------------------------------------


def _copy(pipeline: Path, tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    shutil.copytree(pipeline, repo, symlinks=True)
    return repo


def _run_folders(repo: Path) -> dict[int, Path]:
    """max_steps -> the checkpoint folder of that run."""
    folders = (repo / "artifacts/checkpoints/pretrain").iterdir()
    return {json.loads((f / "run.json").read_text())["pretrain"]["max_steps"]: f for f in folders}


def test_a_changed_knob_sets_checkpoints_aside_and_extend_continues(pipeline: Path,
                                                                    tmp_path: Path) -> None:
    """Raising pretrain.max_steps (20 -> 30) starts a run of its own and keeps the 20-step one,
    saying so; with pretrain.extend the 30-step run continues the 20-step one instead."""
    repo = _copy(pipeline, tmp_path)
    [first] = _run_folders(repo).values()
    first_files = {p.relative_to(first): p.read_bytes() for p in first.rglob("*") if p.is_file()}

    edit_params(repo, **{"pretrain.max_steps": 30})
    fresh = run(_stage("pretrain"), repo)
    assert ("WARNING gpt1.training.checkpoint checkpoints of 1 run(s) with other settings are "
            "kept") in fresh.stderr
    assert "resumed from" not in fresh.stderr and "extending" not in fresh.stderr
    assert {p.relative_to(first): p.read_bytes()
            for p in first.rglob("*") if p.is_file()} == first_files  # untouched
    assert set(_run_folders(repo)) == {20, 30}

    edit_params(repo, **{"pretrain.max_steps": 40, "pretrain.extend": True,
                         "pretrain.keep_other_runs": 1})
    extended = run(_stage("pretrain"), repo)
    assert "deleting the checkpoints of other settings (last step 20)" in extended.stderr
    assert "extending the run in" in extended.stderr and "from its step 30 to max_steps 40" in \
        extended.stderr  # the 30-step run got furthest
    assert set(_run_folders(repo)) == {30, 40}
    assert json.loads((repo / "metrics/pretrain.json").read_text())["steps"] == 40


def test_disk_full_while_writing_the_model(pipeline: Path, tmp_path: Path,
                                           small_disk: Callable[[int], Path]) -> None:
    """artifacts/ on a disk with room for what is there but not for a second model: the stage
    fails in one line naming the folder it was writing, and the model already there, the
    metrics and the folder's other contents stay as they were, with no temporary left over."""
    repo = _copy(pipeline, tmp_path)
    artifacts = repo / "artifacts"
    # the checkpoints stay on the big disk: the stage resumes from the final one, trains no
    # further step, and goes straight to writing artifacts/pretrain
    checkpoints = tmp_path / "checkpoints"
    shutil.move(artifacts / "checkpoints", checkpoints)
    used = sum(p.stat().st_size for p in artifacts.rglob("*") if p.is_file())
    model_size = (artifacts / "pretrain/model.safetensors").stat().st_size
    disk = small_disk((used + model_size // 2) // 1024 + 64)
    for child in artifacts.iterdir():
        shutil.copytree(child, disk / child.name)
    shutil.rmtree(artifacts)
    artifacts.symlink_to(disk)
    (disk / "checkpoints").symlink_to(checkpoints)
    before = {**_snapshot(repo), "free": shutil.disk_usage(disk).free}

    proc = run(_stage("pretrain"), repo, check=False)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 2, output
    assert "stage pretrain failed: no space left on device writing artifacts/pretrain" in \
        proc.stderr, output
    assert "Traceback" not in output
    after = _snapshot(repo)
    for name in ("artifacts", "metrics"):
        assert {k: v for k, v in after.items() if k.startswith(name)} == \
            {k: v for k, v in before.items() if k.startswith(name)}
    assert sorted(p.name for p in disk.iterdir()) == ["bpe", "checkpoints", "pretrain"]
    assert shutil.disk_usage(disk).free == before["free"]  # nothing half-written stays


def test_checkpoints_that_cannot_fit_stop_pretraining_before_it_starts(
        pipeline: Path, tmp_path: Path, small_disk: Callable[[int], Path]) -> None:
    """The checkpoint folder on a disk too small for pretrain.keep_checkpoints + 1 of them and
    the snapshots: the stage stops before training, saying how much it needs and has, and
    writes nothing."""
    repo = _copy(pipeline, tmp_path)
    disk = small_disk(256)
    shutil.rmtree(repo / "artifacts/checkpoints")
    (repo / "artifacts/checkpoints").symlink_to(disk)
    edit_params(repo, **{"pretrain.max_steps": 30})  # a new run: its checkpoints are to come
    before = _snapshot(repo)
    proc = run(_stage("pretrain"), repo, check=False)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 2, output
    assert ("stage pretrain failed: no space left on device writing "
            "artifacts/checkpoints/pretrain (pretrain.keep_checkpoints + 1 = 3 checkpoints, "
            "3 snapshots and the model need about ") in proc.stderr, output
    assert "Traceback" not in output and "pretrain 5/30" not in output  # no step was trained
    assert _snapshot(repo) == before and list(disk.iterdir()) == []
