"""`gpt1 task add` (gpt1.downstream.declare): a task of the user's own tables written into
params.yaml, comments kept, once every split reads; bad input is one line and leaves the file
as it was."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from gpt1.cli import app
from gpt1.config import load_params, read_yaml
from gpt1.downstream.readers import read_task_split
from gpt1.jobs.ingest import ingest_task
from gpt1.presets.edit import set_keys

REPO_PARAMS = Path(__file__).resolve().parents[2] / "params.yaml"


@pytest.fixture()
def params(tmp_path: Path) -> Path:
    """The repository's params.yaml in `tmp_path`, its data root `tmp_path/data`."""
    path = tmp_path / "params.yaml"
    shutil.copyfile(REPO_PARAMS, path)
    set_keys(path, {"ingest.root": "data"})
    return path


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def add(params: Path, *args: str | Path) -> Result:
    return CliRunner().invoke(app, ["task", "add", *map(str, args), "--params", str(params)])


def rows(params: Path, name: str, split: str) -> list[dict[str, object]]:
    task = load_params(params).tasks[name]
    return read_task_split(task, params.parent / "data", split).to_pylist()


def reviews(data: Path) -> dict[str, Path]:
    return {"train": write(data / "reviews/train.csv",
                           'id,review,stars\n1,Loved it,5\n2,"Dull,\nlong",1\n3,Fine,4\n'),
            "dev": write(data / "reviews/dev.csv", "review,stars\nGreat,5\nAwful,2\n"),
            "test": write(data / "reviews/test.csv", "review\nUnsure\n"),
            "predict": write(data / "reviews/new.jsonl", '{"review": "What?"}\n')}


REVIEWS_YAML = """\
reviews:
  title: Movie reviews
  family: classification
  reader: table
  files: {train: reviews/train.csv, dev: reviews/dev.csv, test: reviews/test.csv, predict: reviews/new.jsonl}
  table:
    columns: {text: review, label: stars}
    label_values: {'1': negative, '2': negative, '4': positive, '5': positive}
  labels: [negative, positive]
  metrics: [accuracy]
  overrides: {}
"""  # noqa: E501 (the files line, as written)


def test_add_writes_the_entry_and_requests_it(params: Path) -> None:
    files = reviews(params.parent / "data")
    before = params.read_text(encoding="utf-8")
    result = add(params, "reviews", "--family", "classification", "--title", "Movie reviews",
                 *(arg for split, path in files.items() for arg in (f"--{split}", path)),
                 "--text-column", "review", "--label-column", "stars",
                 "--label-map", "1=negative,2=negative,4=positive,5=positive")
    assert result.exit_code == 0, result.output
    assert result.stdout == f"# {params}: tasks.reviews\n{REVIEWS_YAML}"
    # the one change: the entry after the last task, and its name in finetune.tasks; comments,
    # blank lines and the other keys stay as they were
    entry = "".join(f"  {line}\n" for line in REVIEWS_YAML.splitlines())
    assert params.read_text(encoding="utf-8") == (
        before.replace("  tasks: [sst2]\n", "  tasks: [sst2, reviews]\n")
        .replace("\n\nlm_eval:\n", f"\n{entry}\nlm_eval:\n"))
    assert rows(params, "reviews", "train") == [
        {"idx": 0, "text": "Loved it", "label": 1}, {"idx": 1, "text": "Dull,\nlong", "label": 0},
        {"idx": 2, "text": "Fine", "label": 1}]
    assert rows(params, "reviews", "dev") == [{"idx": 0, "text": "Great", "label": 1},
                                              {"idx": 1, "text": "Awful", "label": 0}]
    assert rows(params, "reviews", "test") == [{"idx": 0, "text": "Unsure", "label": None}]
    assert rows(params, "reviews", "predict") == [{"idx": 0, "text": "What?", "label": None}]


SICK = ("pair_ID\tsentence_A\tsentence_B\tentailment_label\tSemEval_set\n"
        "1\tA man plays.\tA person plays.\tENTAILMENT\tTRAIN\n"
        "2\tA dog runs.\tA cat sleeps.\tNEUTRAL\tTRIAL\n"
        "3\tKids laugh.\tNobody laughs.\tCONTRADICTION\tTRAIN\n"
        "4\tIt rains.\tIt is wet.\tENTAILMENT\tTEST\n"
        "5\tA boy sings.\tA boy is silent.\tCONTRADICTION\tTRAIN\n"
        "6\tBirds fly.\tAnimals fly.\tNEUTRAL\tTRAIN\n")


def test_one_file_of_every_split_typed_relative_to_the_working_directory(
        params: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(params.parent / "data/sick/SICK.tsv", SICK)
    monkeypatch.chdir(params.parent)
    result = add(params, "sick", "--family", "entailment", "--train", "data/sick/SICK.tsv",
                 "--premise-column", "sentence_A", "--hypothesis-column", "sentence_B",
                 "--label-column", "entailment_label", "--split-column", "SemEval_set",
                 "--split-values", "train=TRAIN,dev=TRIAL,test=TEST")
    assert result.exit_code == 0, result.output
    assert read_yaml(params.read_text())["tasks"]["sick"] == {
        "title": "sick", "family": "entailment", "reader": "table",
        "files": {"train": "sick/SICK.tsv", "dev": "sick/SICK.tsv", "test": "sick/SICK.tsv"},
        "table": {"columns": {"premise": "sentence_A", "hypothesis": "sentence_B",
                              "label": "entailment_label"},
                  "split_column": "SemEval_set",
                  "split_values": {"train": "TRAIN", "dev": "TRIAL", "test": "TEST"}},
        "labels": ["CONTRADICTION", "ENTAILMENT", "NEUTRAL"],  # the train rows' values, sorted
        "metrics": ["accuracy"], "overrides": {}}
    assert [r["label"] for r in rows(params, "sick", "train")] == [1, 0, 0, 2]
    assert rows(params, "sick", "dev") == [
        {"idx": 0, "premise": "A dog runs.", "hypothesis": "A cat sleeps.", "label": 2}]
    assert [r["premise"] for r in rows(params, "sick", "test")] == ["It rains."]


def test_no_dev_split_holds_a_tenth_of_train_out(params: Path, tmp_path: Path) -> None:
    """Numeric labels in numeric order, read from the train rows alone; the split column's
    values are the splits' own names; no dev split: a tenth of the 11 train rows held out."""
    labels = ["1", "2", "10"] * 3 + ["1", "2"]
    lines = [f"text {i},{label},train" for i, label in enumerate(labels)]
    path = write(params.parent / "data/nums.csv",
                 "text,label,split\n" + "\n".join(lines) + "\nlast,,test\nodd,10,test\n")
    result = add(params, "nums", "--family", "classification", "--train", path,
                 "--split-column", "split")
    assert result.exit_code == 0, result.output
    entry = read_yaml(params.read_text())["tasks"]["nums"]
    assert entry["files"] == {"train": "nums.csv", "test": "nums.csv"}
    assert entry["holdout"] == {"size": 1, "seed": 0}
    assert entry["labels"] == ["1", "2", "10"]
    assert entry["table"] == {"split_column": "split"}
    loaded = load_params(params)
    assert ingest_task("nums", loaded.tasks["nums"], loaded, params.parent / "data",
                       tmp_path) == {"train": 10, "dev": 1, "test": 2}


def test_multiple_choice_and_regression(params: Path) -> None:
    data = params.parent / "data"
    stories = ("story,q,e1,e2,right\nHe woke.,Then?,He slept.,He rose.,e2\n"
               "It rained.,Then?,She got wet.,She flew.,e1\n")
    story, story_dev = write(data / "cloze.csv", stories), write(data / "cloze_dev.csv", stories)
    # the train file as dev too: the dev figure would be measured on training rows
    refused = add(params, "cloze", "--family", "multiple_choice", "--train", story, "--dev", story,
                  "--context-column", "story", "--choices-column", "e1", "--choices-column", "e2")
    assert refused.exit_code == 2 and "tasks.cloze.files.dev: 'cloze.csv' is files.train too: " \
        "its dev figures would be measured on the rows it trained on" in refused.output, \
        refused.output
    result = add(params, "cloze", "--family", "multiple_choice", "--train", story, "--dev",
                 story_dev,
                 "--context-column", "story", "--question-column", "q",
                 "--choices-column", "e1", "--choices-column", "e2", "--label-column", "right")
    assert result.exit_code == 0, result.output
    entry = read_yaml(params.read_text())["tasks"]["cloze"]
    assert entry["table"] == {"columns": {"context": "story", "question": "q",
                                          "choices": ["e1", "e2"], "label": "right"}}
    assert "labels" not in entry and entry["metrics"] == ["accuracy"]
    assert [(r["choices"], r["label"]) for r in rows(params, "cloze", "dev")] == [
        (["He slept.", "He rose."], 1), (["She got wet.", "She flew."], 0)]

    pairs = ('{"text_a": "a", "text_b": "b", "label": 3.5}\n'
             '{"text_a": "c", "text_b": "d", "label": 0}\n')
    sts, sts_dev = write(data / "sts.jsonl", pairs), write(data / "sts_dev.jsonl", pairs)
    result = add(params, "sts", "--family", "similarity", "--train", sts, "--dev", sts_dev,
                 "--scores", "0,5")
    assert result.exit_code == 0, result.output
    entry = read_yaml(params.read_text())["tasks"]["sts"]
    assert (entry["table"], entry["metrics"]) == ({"scores": [0.0, 5.0]}, ["pearson", "spearman"])
    assert [r["label"] for r in rows(params, "sts", "train")] == [3.5, 0.0]
    assert load_params(params).finetune.tasks == ["sst2", "cloze", "sts"]


def test_a_label_map_onto_one_label_is_refused(params: Path) -> None:
    """`--label-map` declared a one-class classifier, which one class without a map is not."""
    files = reviews(params.parent / "data")
    before = params.read_text()
    result = add(params, "reviews", "--family", "classification", "--train", files["train"],
                 "--dev", files["dev"], "--text-column", "review", "--label-column", "stars",
                 "--label-map", "5=a,4=a,2=a,1=a")
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert "tasks.reviews.labels: need at least 2 distinct labels, got ['a'] (or none, for a " \
        "similarity score): a classifier of one class says it always" in result.output
    assert params.read_text() == before


def test_force_replaces_a_task(params: Path) -> None:
    files = reviews(params.parent / "data")
    args = ("--family", "classification", "--train", files["train"], "--dev", files["dev"],
            "--text-column", "review", "--label-column", "stars")
    assert add(params, "reviews", *args, "--labels", "1,2,4,5").exit_code == 0
    result = add(params, "reviews", *args, "--labels", "5,4,2,1", "--force")
    assert result.exit_code == 0, result.output
    loaded = load_params(params)
    assert loaded.tasks["reviews"].labels == ["5", "4", "2", "1"]
    assert loaded.finetune.tasks == ["sst2", "reviews"]  # once
    set_keys(params, {"finetune.tasks": "all"})
    assert add(params, "again", *args, "--labels", "1,2,4,5").exit_code == 0
    assert load_params(params).finetune.tasks == "all"  # which runs it already


BAD = [
    (["--text-column", "body"],
     "{data}/reviews/train.csv: no column 'body' for text (the file's columns: id, review, "
     "stars)"),
    (["--labels", "negative,positive"],
     "{data}/reviews/train.csv:2: label '5' is not one of ['negative', 'positive']"),
    (["--label-map", "1=neg,2=neg,4=pos"],
     "{data}/reviews/train.csv:2: label '5' is not one of ['1', '2', '4']"),
    (["--label-map", "1:neg"],
     "--label-map '1:neg': expected KEY=VALUE pairs, each key once, e.g. 1=negative,5=positive"),
    (["--premise-column", "review"],
     "{params}: tasks.mine.table.columns: ['premise'] are not fields of a classification task "
     "(its fields: text, label)"),
    (["--label-column", "id", "--dev", None], "--dev: with --split-column every split is read "
                                              "from the --train file (its column 'id' says "
                                              "which); drop --dev"),
    (["--scores", "5,0"], "--scores '5,0': expected LOW,HIGH with LOW < HIGH, e.g. 0,5"),
    (["--format", "xlsx"], "--format 'xlsx': one of csv, tsv, jsonl, parquet"),
]


@pytest.mark.parametrize(("extra", "message"), BAD)
def test_bad_input_is_one_line_and_leaves_params_as_they_were(
        params: Path, extra: list[str | None], message: str) -> None:
    data = params.parent / "data"
    files = reviews(data)
    if None in extra:  # a split column and a dev file
        extra = ["--split-column", "id", "--dev", str(files["dev"])]
    args = ["--family", "classification", "--train", files["train"], "--text-column", "review",
            "--label-column", "stars", *extra]
    before = params.read_bytes()
    result = add(params, "mine", *args)
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == f"error: {message.format(data=data, params=params)}\n"
    assert params.read_bytes() == before


def test_a_split_value_given_another_value_is_told_to_map_to_itself(params: Path) -> None:
    """Values train, dev and test, with test=TEST given, suggested mapping test rows to dev."""
    path = write(params.parent / "data" / "s.csv",
                 "text,label,set\na,0,train\nb,1,train\nc,0,dev\nd,1,test\n")
    result = add(params, "mine", "--family", "classification", "--train", str(path),
                 "--split-column", "set", "--split-values", "test=TEST")
    assert (result.exit_code, result.stderr) == (
        2, f"error: --train {path}: column 'set' holds 'test', which is no split's value: map it "
           "with --split-values (e.g. test=test)\n")


@pytest.mark.parametrize("where", ["in the data root", "outside it", "dangling"])
def test_a_train_file_that_is_a_bad_symlink_is_named_so(params: Path, tmp_path: Path,
                                                        where: str) -> None:
    """A symlink loop given as --train was reported as "no such file"."""
    folder = tmp_path / "data" if where == "in the data root" else tmp_path
    folder.mkdir(exist_ok=True)
    train = folder / "loop.csv"
    if where == "dangling":
        train.symlink_to(tmp_path / "gone.csv")
        said = f"--train {train}: a symlink to nothing ({tmp_path / 'gone.csv'})"
    else:
        train.symlink_to(folder / "back.csv")
        (folder / "back.csv").symlink_to(train)
        # in the data root: the root's check names the loop's first link, in name order
        said = (f"ingest.root: {folder / 'back.csv'} is a symlink that loops; DVC fails on it: "
                "remove it from the data root" if where == "in the data root" else
                f"--train {train}: a symlink that loops")
    before = params.read_bytes()
    result = add(params, "mine", "--family", "classification", "--train", str(train))
    assert (result.exit_code, result.stderr) == (2, f"error: {said}\n")
    assert params.read_bytes() == before


@pytest.mark.parametrize(("name", "args", "message"), [
    ("sst2", [], "tasks.sst2 is already in {params}: choose another name, or --force to replace "
                 "it"),
    ("my task", [], "task name 'my task': use letters, digits and _ (it names the task's folders "
                    "and DVC stages; `all` is finetune.tasks' word for every task)"),
    ("mine", ["--family", "regression"],
     "--family 'regression': one of classification, entailment, similarity, multiple_choice"),
    ("mine", ["--train", "{tmp}/outside.csv"],
     "--train {tmp}/outside.csv: not under the data root {tmp}/data (ingest.root of {params}), "
     "the only place the pipeline reads task files from: move or copy it there, or set "
     "ingest.root to a folder that holds it (gpt1 set ingest.root=...)"),
    ("mine", ["--train", "{tmp}/data/nope.csv"], "--train {tmp}/data/nope.csv: no such file"),
    ("mine", ["--train", "{tmp}/data/one.csv"],
     "--train {tmp}/data/one.csv: the train rows' label column 'label' holds 1 distinct "
     "value(s) ['5']: a classifier needs 2 to 100; check --label-column, or give --labels or "
     "--label-map"),
])
def test_bad_task_names_families_and_files(params: Path, tmp_path: Path, name: str,
                                           args: list[str], message: str) -> None:
    write(tmp_path / "outside.csv", "text,label\na,1\nb,2\n")
    write(tmp_path / "data/one.csv", "text,label\na,5\nb,5\n")
    given = dict(zip(args[::2], args[1::2], strict=True))
    options = {"--family": "classification", "--train": "{tmp}/data/one.csv", **given}
    before = params.read_bytes()
    result = add(params, name, *(item.format(tmp=tmp_path) for pair in options.items()
                                 for item in pair))
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == f"error: {message.format(tmp=tmp_path, params=params)}\n"
    assert params.read_bytes() == before
