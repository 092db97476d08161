"""gpt1.config: params.yaml validated once, with errors that name the file and the dotted key."""

from __future__ import annotations

from pathlib import Path

import pytest
from ruamel.yaml import YAML

from gpt1.config import Params, ParamsError, load_params, parse_params, read_yaml

REPO_PARAMS = Path(__file__).resolve().parents[1] / "params.yaml"


@pytest.fixture()
def raw() -> dict:
    return read_yaml(REPO_PARAMS.read_text(encoding="utf-8"))


def _error(raw: dict, tmp_path: Path) -> str:
    path = tmp_path / "my-params.yaml"
    YAML(typ="safe", pure=True).dump(raw, path)
    with pytest.raises(ParamsError) as info:
        load_params(path)
    assert str(path) in str(info.value)
    return str(info.value)


def test_repo_params_load() -> None:
    params = load_params(REPO_PARAMS)
    assert isinstance(params, Params)
    assert params.model.n_embd % params.model.n_head == 0
    assert params.finetune.tasks == ["sst2"]  # the only sample task large enough to mean much
    assert params.ingest.max_train_examples is None
    assert params.pretrain.schedule in ("cosine", "linear")
    cfg = params.finetune.for_task(params.tasks["sst2"], seed=7)
    assert cfg.model_dump() == {**params.finetune.train.model_dump(), "seed": 7}


def test_params_are_frozen() -> None:
    params = load_params(REPO_PARAMS)
    with pytest.raises(ValueError):
        params.model.n_embd = 1  # type: ignore[misc]


@pytest.mark.parametrize(("section", "key", "value"), [
    ("model", "n_embd", "wide"),
    ("pretrain", "lr", "fast"),
    ("clean", "dedupe", "maybe"),
    ("pretrain", "schedule", "step"),
    ("tokenize", "val_every", 1),  # out of range
    ("bpe", "vocab_size", 10),
])
def test_wrong_value_names_dotted_key_and_file(raw: dict, tmp_path: Path, section: str,
                                               key: str, value: object) -> None:
    raw[section][key] = value
    message = _error(raw, tmp_path)
    assert f"{section}.{key}:" in message
    assert repr(value) in message


def test_unknown_key_names_dotted_key(raw: dict, tmp_path: Path) -> None:
    raw["model"]["n_embed"] = 256  # a typo of n_embd
    message = _error(raw, tmp_path)
    assert "model.n_embed:" in message and "Extra inputs" in message


def test_nested_wrong_type_names_full_path(raw: dict, tmp_path: Path) -> None:
    raw["finetune"]["train"]["epochs"] = "three"
    assert "finetune.train.epochs:" in _error(raw, tmp_path)


def test_missing_section_and_key(raw: dict, tmp_path: Path) -> None:
    del raw["bpe"]
    del raw["model"]["n_ctx"]
    message = _error(raw, tmp_path)
    assert "2 invalid value(s)" in message
    assert "bpe: Field required" in message and "model.n_ctx: Field required" in message


def test_heads_must_divide_width(raw: dict, tmp_path: Path) -> None:
    raw["model"]["n_embd"], raw["model"]["n_head"] = 30, 4
    assert "must be divisible by n_head" in _error(raw, tmp_path)


# the paper's input transformations (Figure 1): the special tokens and one token of each text
SHORTEST_EXAMPLE = {"sst2": 3,  # <start> text <classify>
                    "rte": 5,  # <start> premise <delim> hypothesis <classify>
                    "stsb": 5,  # <start> text_a <delim> text_b <classify>
                    "race": 6}  # <start> context question <delim> answer <classify>


@pytest.mark.parametrize("task", sorted(SHORTEST_EXAMPLE))
def test_a_context_too_short_for_a_task_fine_tuned_is_refused(raw: dict, tmp_path: Path,
                                                              task: str) -> None:
    """model.n_ctx=2 fine-tuned on empty examples and reported accuracy 47.0 with exit 0."""
    least = SHORTEST_EXAMPLE[task]
    raw["finetune"]["tasks"] = [task]
    raw["model"]["n_ctx"] = least
    load_params_from(raw, tmp_path)
    raw["model"]["n_ctx"] = least - 1
    family = raw["tasks"][task]["family"]
    assert _error(raw, tmp_path).endswith(
        f"model.n_ctx: {least - 1} tokens leave task {task} ({family}) no room for its special "
        f"tokens and a token of each text; set it to at least {least}")


def test_a_short_context_names_the_task_that_needs_the_most(raw: dict, tmp_path: Path) -> None:
    raw["finetune"]["tasks"] = ["sst2"]
    raw["analysis"]["transfer"]["tasks"] = {"race": 100}
    raw["model"]["n_ctx"] = 2
    assert "leave task race (multiple_choice) no room" in _error(raw, tmp_path)
    raw["analysis"]["transfer"]["tasks"] = {}
    raw["model"]["n_ctx"] = 4  # enough for sst2; the entailment tasks declared are not run
    load_params_from(raw, tmp_path)


def load_params_from(raw: dict, tmp_path: Path) -> None:
    path = tmp_path / "ok-params.yaml"
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False  # in flow style, ruamel writes `{host: ::1}`, not YAML
    yaml.dump(raw, path)
    load_params(path)


def test_task_listed_twice(raw: dict, tmp_path: Path) -> None:
    raw["finetune"]["tasks"] = ["sst2", "sst2"]
    assert "finetune.tasks: list each task once" in _error(raw, tmp_path)


def test_requested_task_must_be_in_the_registry(raw: dict, tmp_path: Path) -> None:
    raw["finetune"]["tasks"] = ["sst2", "imdb"]
    message = _error(raw, tmp_path)
    assert "finetune.tasks: ['imdb'] are not in the task registry" in message


def test_all_requests_every_registry_task(raw: dict) -> None:
    raw["finetune"]["tasks"] = "all"
    params = parse_params(raw)
    assert params.requested_tasks() == list(raw["tasks"])
    raw["finetune"]["tasks"] = ["cola", "sst2"]
    assert parse_params(raw).requested_tasks() == ["cola", "sst2"]


def test_seeds_are_distinct(raw: dict, tmp_path: Path) -> None:
    raw["finetune"]["seeds"] = [1, 2, 1]
    assert "finetune.seeds: list each seed once, got [1, 2, 1]" in _error(raw, tmp_path)
    raw["finetune"]["seeds"] = []
    assert "finetune.seeds:" in _error(raw, tmp_path)


def test_unknown_override_key(raw: dict, tmp_path: Path) -> None:
    raw["tasks"]["sst2"]["overrides"] = {"learning_rate": 0.1, "seed": 5}
    message = _error(raw, tmp_path)
    assert "tasks.sst2.overrides: unknown keys ['learning_rate', 'seed']" in message


def test_for_task_applies_overrides(raw: dict) -> None:
    raw["tasks"]["sst2"]["overrides"] = {"lr": 0.5, "epochs": 7}
    params = parse_params(raw)
    cfg = params.finetune.for_task(params.tasks["sst2"], seed=3)
    assert cfg.lr == 0.5 and cfg.epochs == 7
    shared = params.finetune.train
    assert cfg.model_dump() == {**shared.model_dump(), "lr": 0.5, "epochs": 7, "seed": 3}
    assert shared.lr == raw["finetune"]["train"]["lr"]  # the shared knobs are untouched


def test_wrong_override_value_names_file_and_key(raw: dict, tmp_path: Path) -> None:
    raw["tasks"]["sst2"]["overrides"] = {"lr": "fast"}
    message = _error(raw, tmp_path)
    assert "my-params.yaml: tasks.sst2.overrides.lr: Input should be a valid number" in message
    assert "\n" not in message  # one error, one line


@pytest.mark.parametrize("section", ["pretrain", "finetune.train"])
@pytest.mark.parametrize("device", ["tpu", "gpu", "cuda:x", "CPU", ""])
def test_unknown_device(raw: dict, tmp_path: Path, section: str, device: str) -> None:
    node = raw
    for part in section.split("."):
        node = node[part]
    node["device"] = device
    assert f"{section}.device: {device!r} is not a device: use auto, cpu, cuda or cuda:N" in \
        _error(raw, tmp_path)


@pytest.mark.parametrize("device", ["auto", "cpu", "cuda", "cuda:1"])
def test_known_devices(raw: dict, device: str) -> None:
    raw["pretrain"]["device"] = device
    assert parse_params(raw).pretrain.device == device


def test_warmup_longer_than_the_run(raw: dict, tmp_path: Path) -> None:
    raw["pretrain"]["warmup_steps"], raw["pretrain"]["max_steps"] = 400, 300
    assert "pretrain.warmup_steps: 400 is more than max_steps (300)" in _error(raw, tmp_path)
    raw["pretrain"]["warmup_steps"] = 300  # warming up for the whole run is allowed
    assert parse_params(raw).pretrain.warmup_steps == 300


@pytest.mark.parametrize("pattern", ["../extra/*.txt", "../../../etc/*.conf", "/etc/*.conf",
                                     "corpus/../../x.txt"])
def test_corpus_glob_outside_the_root(raw: dict, tmp_path: Path, pattern: str) -> None:
    raw["ingest"]["corpus"] = ["corpus/*.txt", pattern]
    message = _error(raw, tmp_path)
    assert f"ingest.corpus.1: {pattern!r} must be a relative path inside ingest.root" in message


@pytest.mark.parametrize(("key", "pattern", "why"), [
    ("ingest.corpus", ".", "names a folder, not files"),
    ("ingest.corpus", "corpus/", "names a folder, not files"),
    ("ingest.corpus", "corpus/**", "names a folder, not files"),
    ("ingest.corpus", "corpus/**.txt", "'**' can only be a whole path component"),
    ("lm_eval.files", "books/a**/*.txt", "'**' can only be a whole path component"),
])
def test_a_glob_that_names_no_files_is_refused_at_load(raw: dict, tmp_path: Path, key: str,
                                                       pattern: str, why: str) -> None:
    """Checked when params load, naming the key: not an IndexError or pathlib's own words in
    the middle of a stage."""
    section, field = key.split(".")
    raw[section][field] = [pattern]
    assert f"{key}.0: {pattern!r}" in _error(raw, tmp_path) and why in _error(raw, tmp_path)


@pytest.mark.parametrize("files", ["../glue/SST-2/train.tsv", ["a.tsv", "/data/b.tsv"]])
def test_task_file_outside_the_root(raw: dict, tmp_path: Path, files: object) -> None:
    raw["tasks"]["sst2"]["files"]["train"] = files
    message = _error(raw, tmp_path)
    assert "tasks.sst2.files.train: " in message and "inside ingest.root" in message


def test_key_given_twice_is_refused(tmp_path: Path) -> None:
    text = REPO_PARAMS.read_text(encoding="utf-8")
    path = tmp_path / "params.yaml"
    path.write_text(text + "model:\n  n_ctx: 64\n", encoding="utf-8")
    with pytest.raises(ParamsError) as info:
        load_params(path)
    line = text.count("\n") + 1
    assert str(info.value).startswith(f"{path}:{line}:1: not valid YAML: ")
    assert 'found duplicate key "model"' in str(info.value)


def test_values_are_read_as_dvc_reads_them() -> None:
    """DVC records in dvc.lock what its YAML loader (ruamel.yaml, YAML 1.2) reads from
    params.yaml: the stages read the same values, of the same types, where YAML 1.1 differs."""
    from dvc.utils.serialize import parse_yaml

    text = REPO_PARAMS.read_text(encoding="utf-8") + (
        "extra:\n  words: [yes, No, on, off, y]\n  numbers: [1e-3, 6.25e-5, 010, 0o10]\n"
        "  clock: 1:30\n")
    ours, dvcs = read_yaml(text), parse_yaml(text, "params.yaml")
    assert ours == dvcs
    assert ours["extra"] == {"words": ["yes", "No", "on", "off", "y"],
                             "numbers": [0.001, 6.25e-5, 10, 8], "clock": "1:30"}


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "params.yaml"
    path.write_text("ingest:\n  corpus: [a.txt\nclean: {}\n", encoding="utf-8")
    with pytest.raises(ParamsError) as info:
        load_params(path)
    assert str(info.value).startswith(f"{path}:3:")
    assert "\n" not in str(info.value)


def test_registry_entries_are_consistent() -> None:
    tasks = load_params(REPO_PARAMS).tasks  # the paper's tasks: tests/downstream/test_readers.py
    assert tasks["stsb"].regression and not tasks["mrpc"].regression
    assert tasks["mnli"].eval_splits == ["dev", "dev_mismatched"]
    assert tasks["story_cloze"].eval_splits == ["dev"]  # held out of the train file
    assert tasks["race"].eval_splits == ["dev_high", "dev_middle"]
    glue = sorted(n for n, t in tasks.items() if t.glue)
    assert glue == ["cola", "mnli", "mrpc", "qnli", "qqp", "rte", "sst2", "stsb"]


@pytest.mark.parametrize(("change", "expected"), [
    ({"files": {"dev": "a.tsv"}}, "tasks.sst2: files.train is missing"),
    ({"files": {"train": "a", "valid": "b"}}, "split names must be train, dev[_x] or test[_x]"),
    ({"files": {"train": "a"}}, "no dev split"),
    ({"holdout": {"size": 5, "seed": 1}}, "files.dev and holdout both give a dev split"),
    ({"paper": {"test": 90.0}}, "paper: ['test'] are not dev splits ['dev']"),
    ({"labels": ["0", "0"]}, "need at least 2 distinct labels"),
    # one class: a classifier that always says it (a --label-map onto one label wrote this)
    ({"labels": ["a"]}, "labels: need at least 2 distinct labels, got ['a'] (or none, for a "
                        "similarity score): a classifier of one class says it always"),
    # the dev figure measured on training rows
    ({"files": {"train": "glue/SST-2/train.tsv", "dev": "glue/SST-2/train.tsv"}},
     "files.dev: 'glue/SST-2/train.tsv' is files.train too: its dev figures would be measured "
     "on the rows it trained on; give it a file of its own"),
    ({"files": {"train": "a.tsv", "dev": "b.tsv", "test": "./a.tsv"}},
     "files.test: 'a.tsv' is files.train too"),
    ({"labels": None}, "a classification task needs its labels"),
    ({"metrics": ["pearson"]}, "do not apply to this task"),
    ({"family": "multiple_choice"}, "a multiple-choice label is the index of the answer"),
    ({"family": "similarity", "labels": None}, "do not apply to this task"),  # accuracy
])
def test_inconsistent_registry_entry(raw: dict, tmp_path: Path, change: dict,
                                     expected: str) -> None:
    raw["tasks"]["sst2"].update(change)
    message = _error(raw, tmp_path)
    assert expected in message and "tasks.sst2" in message




@pytest.mark.parametrize(("change", "expected"), [
    (lambda r: r["pretrain"].update(snapshots=[0, 10, 10]),
     "pretrain.snapshots: list each step once, in increasing order, got [0, 10, 10]"),
    (lambda r: r["analysis"]["ablation"].update(variants=["full", "bert"]),
     "analysis.ablation.variants.1: Input should be 'full', 'no_pretrain', 'no_aux' or 'lstm'"),
    (lambda r: r["analysis"]["ablation"]["tasks"].update(sst2=[1000, 1000]),
     "analysis.ablation.tasks.sst2: list each train size once (null: all rows), got "
     "[1000, 1000]"),
    (lambda r: r["analysis"]["ablation"]["tasks"].update(imdb=[100]),
     "analysis.ablation.tasks: ['imdb'] are not in the task registry"),
    (lambda r: r["analysis"]["transfer"]["tasks"].update(boolq=None),
     "analysis.transfer.tasks: ['boolq'] are not in the task registry"),
    (lambda r: r["analysis"]["zero_shot"]["tasks"].update(sst2="sarcasm"),
     "analysis.zero_shot.tasks.sst2: Input should be 'sentiment', 'acceptability' or 'choice'"),
    (lambda r: r["analysis"].update(seeds=[1, 1]),
     "analysis.seeds: list each seed once, got [1, 1]"),
])
def test_bad_analysis_params_name_the_key(raw: dict, tmp_path: Path, change, expected: str
                                          ) -> None:
    change(raw)
    assert expected in _error(raw, tmp_path)


@pytest.mark.parametrize(("name", "heuristic", "change", "expected"), [
    ("rte", "sentiment", {}, "the sentiment heuristic answers classification tasks; rte is "
                             "entailment"),
    ("sst2", "choice", {}, "the choice heuristic answers multiple_choice tasks; sst2 is "
                           "classification"),
    ("story_cloze", "acceptability", {}, "the acceptability heuristic answers classification "
                                         "tasks; story_cloze is multiple_choice"),
    ("sst2", "sentiment", {"labels": ["bad", "fair", "good"]},
     "the sentiment heuristic answers two-label tasks; sst2 has labels ['bad', 'fair', 'good']"),
    ("cola", "acceptability", {"metrics": ["f1", "mcc"]},
     "cola is scored by f1; the zero-shot stage reports accuracy or mcc"),
])
def test_a_zero_shot_heuristic_that_cannot_answer_its_task_fails_at_load(
        raw: dict, tmp_path: Path, name: str, heuristic: str, change: dict,
        expected: str) -> None:
    raw["analysis"]["zero_shot"]["tasks"][name] = heuristic
    raw["tasks"][name].update(change)
    path = tmp_path / "my-params.yaml"
    assert _error(raw, tmp_path) == f"{path}: analysis.zero_shot.tasks.{name}: {expected}"


def test_every_heuristic_loads_on_a_task_it_answers(raw: dict) -> None:
    zero_shot = {"sst2": "sentiment", "cola": "acceptability", "story_cloze": "choice",
                 "race": "choice"}
    raw["analysis"]["zero_shot"]["tasks"] = zero_shot
    assert parse_params(raw).analysis.zero_shot.tasks == zero_shot


def test_an_unknown_zero_shot_task_is_named_before_its_heuristic_is_checked(raw: dict,
                                                                           tmp_path: Path) -> None:
    raw["analysis"]["zero_shot"]["tasks"]["imdb"] = "choice"
    assert "analysis.zero_shot.tasks: ['imdb'] are not in the task registry" in _error(raw,
                                                                                      tmp_path)


@pytest.mark.parametrize(("source", "source_dir", "expected"), [
    ("train", "../openai-gpt1", "pretrain.source_dir: source train pretrains on the token shards, "
                                "so it must be data/shards, got '../openai-gpt1'"),
    ("openai", "data/shards", "pretrain.source_dir: source openai imports a released model: "
                              "name its folder, got 'data/shards'"),
    ("hf", "", "pretrain.source_dir: source hf imports a released model: name its folder"),
    ("gpt2", "../gpt2", "pretrain.source: Input should be 'train', 'openai' or 'hf'"),
])
def test_pretrained_source_and_its_folder(raw: dict, tmp_path: Path, source: str,
                                          source_dir: str, expected: str) -> None:
    raw["pretrain"].update(source=source, source_dir=source_dir)
    assert expected in _error(raw, tmp_path)
    raw["pretrain"].update(source="openai", source_dir="../openai-gpt1")
    assert parse_params(raw).pretrain.source_dir == "../openai-gpt1"


TABLE_TASK = {"title": "Mine", "family": "classification", "reader": "table",
              "files": {"train": "mine/train.csv", "dev": "mine/dev.csv"},
              "labels": ["neg", "pos"], "metrics": ["accuracy"],
              "table": {"columns": {"text": "review", "label": "stars"}}}
CHOICE_TASK = {"family": "multiple_choice", "labels": None,
               "table": {"columns": {"choices": ["e1", "e2"]}, "label_values": {"A": "first"}}}
REGRESSION = {"family": "similarity", "labels": None, "metrics": ["pearson"]}


@pytest.mark.parametrize(("change", "expected"), [
    ({"table": None}, "tasks.mine.table: reader: table needs a table section (its columns, and "
                      "format, label_values, scores, split_column where they apply)"),
    ({"reader": "glue_sst2"}, "tasks.mine.table: only for reader: table (this task's reader is "
                              "'glue_sst2')"),
    ({"table": {"columns": {"premise": "p"}}},
     "tasks.mine.table.columns: ['premise'] are not fields of a classification task (its "
     "fields: text, label)"),
    ({"table": {"columns": {"text": ["a", "b"]}}},
     "tasks.mine.table.columns.text: one column's name, got ['a', 'b']"),
    ({**CHOICE_TASK, "table": {"columns": {"choices": ["e1"]}}},
     "tasks.mine.table.columns.choices: one list column, or at least 2 distinct columns (one per "
     "choice), got ['e1']"),
    ({"table": {"label_values": {"1": "neg", "2": "bad"}}},
     "tasks.mine.table.label_values: ['bad'] are not labels ['neg', 'pos']"),
    ({"table": {"label_values": {"pos": "neg", "neg": "neg"}}},
     "tasks.mine.table.label_values: every value maps to ['neg']: a classifier needs at least 2 "
     "labels"),
    (CHOICE_TASK, "tasks.mine.table.label_values: ['first'] are not choice indices from 0 or the "
                  "choice columns ['e1', 'e2']"),
    ({**REGRESSION, "table": {}}, "tasks.mine.table.scores: a similarity task without labels is "
                                  "a regression: give the scores' range [low, high]"),
    ({**REGRESSION, "table": {"scores": [0, 5], "label_values": {"a": "b"}}},
     "tasks.mine.table.label_values: a regression's label is a score, read as it is"),
    ({"table": {"scores": [0, 5]}},
     "tasks.mine.table.scores: only for a regression (a similarity task with labels: null)"),
    ({**REGRESSION, "table": {"scores": [5, 0]}},
     "tasks.mine.table.scores: give [low, high] with low < high, got [5.0, 0.0]"),
    ({"files": {"train": "mine/train.txt", "dev": "mine/dev.csv"}},
     "tasks.mine.table.format: cannot tell the format of files.train 'mine/train.txt' from its "
     "extension: set format (csv, tsv, jsonl or parquet) or name the file .csv, .tsv, .tab, "
     ".jsonl, .ndjson, .parquet, .pq"),
    ({"table": {"format": "xlsx"}}, "tasks.mine.table.format: Input should be 'csv', 'tsv', "
                                    "'jsonl' or 'parquet' (got 'xlsx')"),
    ({"table": {"split_values": {"dev": "TRIAL"}}},
     "tasks.mine.table.split_values: name the column that holds them (split_column)"),
    ({"table": {"split_column": "set", "split_values": {"valid": "V"}}},
     "tasks.mine.table.split_values: ['valid'] are not splits of files ['dev', 'train']"),
    ({"table": {"split_column": "set", "split_values": {"dev": "train"}}},
     "tasks.mine.table.split_values: each split needs its own value of 'set', got "
     "{'dev': 'train', 'train': 'train'}"),  # the dumped file's key order
])
def test_inconsistent_table_task(raw: dict, tmp_path: Path, change: dict, expected: str) -> None:
    raw["tasks"]["mine"] = {**TABLE_TASK, **change}
    assert _error(raw, tmp_path) == f"{tmp_path / 'my-params.yaml'}: {expected}"


def test_a_table_task_loads(raw: dict) -> None:
    raw["tasks"]["mine"] = {**TABLE_TASK,
                            "files": {**TABLE_TASK["files"], "test": "mine/all.tsv",
                                      "predict": "mine/new.jsonl"},
                            "table": {"columns": {"text": "review"},
                                      "label_values": {1: "neg", 5: "pos"},
                                      "split_column": "set", "split_values": {"test": 3}}}
    task = parse_params(raw).tasks["mine"]
    assert task.table is not None
    assert task.table.label_values == {"1": "neg", "5": "pos"}  # YAML numbers, as the file's text
    assert task.table.split_value("test") == "3" and task.table.split_value("dev") == "dev"
    assert task.table.column("text") == "review" and task.table.column("label") == "label"
    assert task.eval_splits == ["dev"]
    assert task.data_splits == ["train", "dev", "test"]  # predict: not ingested


def test_a_file_to_score_may_be_a_splits_file(raw: dict) -> None:
    """Only a train file read again as dev or test is refused: scoring it is no figure."""
    raw["tasks"]["mine"] = {**TABLE_TASK, "files": {**TABLE_TASK["files"],
                                                    "predict": "mine/train.csv"}}
    assert parse_params(raw).tasks["mine"].files["predict"] == "mine/train.csv"


def test_the_analyses_accept_a_table_task_as_any_registry_task(raw: dict) -> None:
    raw["tasks"]["mine"] = {**TABLE_TASK, "table": {"columns": {"text": "review"}}}
    raw["analysis"]["ablation"]["tasks"] = {"mine": [100]}
    raw["analysis"]["transfer"]["tasks"] = {"mine": 100}
    raw["analysis"]["zero_shot"]["tasks"] = {"mine": "sentiment"}
    analysis = parse_params(raw).analysis
    assert analysis.ablation.tasks == {"mine": [100]} and analysis.transfer.tasks == {"mine": 100}
    assert analysis.zero_shot.tasks == {"mine": "sentiment"}


@pytest.mark.parametrize(("host", "expected"), [
    ("[::1]", "flows.server.host: '[::1]': write an IPv6 address without brackets "
              "(::1)"),
    ("my host", "flows.server.host: 'my host': expected a host name, an IPv4 "
                "address or an IPv6 address (::1)"),
])
def test_the_servers_host_is_one_it_can_listen_on(raw: dict, tmp_path: Path, host: str,
                                                  expected: str) -> None:
    """flows.serve took `[::1]` and failed with a traceback in its port check."""
    raw["flows"]["server"]["host"] = host
    assert expected in _error(raw, tmp_path)
    raw["flows"]["server"]["host"] = "::1"
    load_params_from(raw, tmp_path)
