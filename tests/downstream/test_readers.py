"""gpt1.downstream.readers: every registry reader, on the real files beside the repo where we have
them and on small files in the exact release layout where we do not (QQP, MNLI, SNLI, SciTail,
RACE)."""

from __future__ import annotations

import json
import logging
import re
from contextlib import AbstractContextManager
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from gpt1.config import TaskParams, load_params
from gpt1.downstream.families import family_of
from gpt1.downstream.readers import (
    READERS,
    holdout_split,
    missing_files,
    read_task_split,
    split_paths,
)
from gpt1.errors import DataFormatError

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "gpt1" / "sample_data"


@pytest.fixture(scope="module")
def tasks() -> dict[str, TaskParams]:
    """The task registry of the repository's params.yaml."""
    return load_params(REPO / "params.yaml").tasks


def raises(kind: type[Exception], message: str,
           ) -> AbstractContextManager[pytest.ExceptionInfo[Exception]]:
    """pytest.raises for an error whose message contains `message` verbatim."""
    return pytest.raises(kind, match=re.escape(message))


def write(root: Path, rel: str, text: str, bom: bool = False) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8"))
    return path


def tsv(*rows: tuple[object, ...]) -> str:
    return "".join("\t".join(map(str, row)) + "\n" for row in rows)


def read(task: TaskParams, root: Path, split: str) -> dict[str, list[object]]:
    table = read_task_split(task, root, split)
    assert table.schema == family_of(task).schema(task)
    return table.to_pydict()


# The paper's tasks (Radford et al. 2018, Tables 2-4): family, the metric reported, and its
# scores by dev split (MNLI matched / mismatched, RACE middle / high school)
PAPER_TASKS = {
    "snli": ("entailment", "accuracy", {"dev": 89.9}),
    "mnli": ("entailment", "accuracy", {"dev": 82.1, "dev_mismatched": 81.4}),
    "qnli": ("entailment", "accuracy", {"dev": 88.1}),
    "rte": ("entailment", "accuracy", {"dev": 56.0}),
    "scitail": ("entailment", "accuracy", {"dev": 88.3}),
    "story_cloze": ("multiple_choice", "accuracy", {"dev": 86.5}),
    "race": ("multiple_choice", "accuracy", {"dev_middle": 62.9, "dev_high": 57.4}),
    "cola": ("classification", "mcc", {"dev": 45.4}),
    "sst2": ("classification", "accuracy", {"dev": 91.3}),
    "mrpc": ("similarity", "f1", {"dev": 82.3}),
    "stsb": ("similarity", "pearson", {"dev": 82.0}),
    "qqp": ("similarity", "f1", {"dev": 70.3}),
}


@pytest.mark.parametrize("name", PAPER_TASKS)
def test_the_papers_tasks_are_in_the_registry(tasks: dict[str, TaskParams], name: str) -> None:
    """Each is there, as the paper ran it; the registry may hold more."""
    family, metric, paper = PAPER_TASKS[name]
    task = tasks[name]
    assert (task.family, task.metrics[0], task.paper) == (family, metric, paper)
    assert set(paper) <= set(task.eval_splits)


def test_every_registry_task_has_a_reader_of_its_family(tasks: dict[str, TaskParams]) -> None:
    for task in tasks.values():
        assert READERS[task.reader].family == task.family, task.title


def test_split_paths(tasks: dict[str, TaskParams]) -> None:
    assert split_paths(tasks["sst2"], "dev") == ["glue/SST-2/dev.tsv"]
    assert split_paths(tasks["race"], "train") == ["multiple_choice/RACE/train/middle",
                                                   "multiple_choice/RACE/train/high"]


def test_reader_of_another_family_is_refused(tasks: dict[str, TaskParams], tmp_path: Path) -> None:
    task = tasks["cola"].model_copy(update={"reader": "glue_rte"})
    with raises(ValueError, "reads entailment files, not classification"):
        read_task_split(task, tmp_path, "train")
    task = tasks["cola"].model_copy(update={"reader": "nope"})
    with raises(ValueError, "unknown reader 'nope'"):
        read_task_split(task, tmp_path, "train")


# -- the real files in ../shared/data ------------------------------------------------------------

ROW_COUNTS = {
    ("sst2", "train"): 67_349, ("sst2", "dev"): 872, ("sst2", "test"): 1_821,
    ("cola", "train"): 8_551, ("cola", "dev"): 1_043, ("cola", "test"): 1_063,
    ("mrpc", "train"): 3_668, ("mrpc", "dev"): 408, ("mrpc", "test"): 1_725,
    ("stsb", "train"): 5_749, ("stsb", "dev"): 1_500, ("stsb", "test"): 1_379,
    ("rte", "train"): 2_490, ("rte", "dev"): 277, ("rte", "test"): 3_000,
    ("qnli", "dev"): 5_463, ("qnli", "test"): 5_463,
    ("story_cloze", "train"): 1_871, ("story_cloze", "test"): 1_871,
}


@pytest.mark.parametrize(("name", "split"), list(ROW_COUNTS))
def test_real_row_counts(tasks: dict[str, TaskParams], shared_data: Path, name: str,
                         split: str) -> None:
    task = tasks[name]
    table = read_task_split(task, shared_data, split)
    assert table.schema == family_of(task).schema(task)
    assert table.num_rows == ROW_COUNTS[name, split]
    labels = table.column("label")
    if name != "story_cloze" and split == "test":  # GLUE test files have no labels
        assert labels.null_count == table.num_rows
    else:
        assert labels.null_count == 0
        assert table.column("idx").to_pylist() == list(range(table.num_rows))


def first(task: TaskParams, root: Path, split: str) -> dict[str, object]:
    return read_task_split(task, root, split).slice(0, 1).to_pylist()[0]


def test_real_glue_values(tasks: dict[str, TaskParams], shared_data: Path) -> None:
    root = shared_data
    assert first(tasks["sst2"], root, "train") == {
        "idx": 0, "text": "hide new secretions from the parental units ", "label": 0}
    sst_test = read_task_split(tasks["sst2"], root, "test")
    assert sst_test.column("idx")[-1].as_py() == 1820
    assert first(tasks["cola"], root, "train") == {
        "idx": 0, "text": "Our friends won't buy this analysis, let alone the next one we propose.",
        "label": 1}
    cola_dev = read_task_split(tasks["cola"], root, "dev")  # no final newline
    assert cola_dev.slice(1042).to_pylist() == [
        {"idx": 1042, "text": "John talked to Bill about himself.", "label": 1}]
    assert first(tasks["cola"], root, "test") == {
        "idx": 0, "text": "Bill whistled past the house.", "label": None}
    assert first(tasks["mrpc"], root, "train") == {  # the header starts with a BOM
        "idx": 0,
        "text_a": 'Amrozi accused his brother, whom he called "the witness", of deliberately '
                  "distorting his evidence.",
        "text_b": 'Referring to him as only "the witness", Amrozi accused his brother of '
                  "deliberately distorting his evidence.",
        "label": 1}
    assert read_task_split(tasks["mrpc"], root, "dev").column("text_b")[0].as_py().startswith(
        '"The foodservice pie')  # a lone quote is text, not CSV quoting
    mrpc_test = read_task_split(tasks["mrpc"], root, "test")
    assert mrpc_test.column("idx")[-1].as_py() == 1724
    stsb = read_task_split(tasks["stsb"], root, "train").slice(0, 2).to_pydict()
    assert stsb == {"idx": [0, 1],
                    "text_a": ["A plane is taking off.", "A man is playing a large flute."],
                    "text_b": ["An air plane is taking off.", "A man is playing a flute."],
                    "label": [5.0, 3.8]}
    assert read_task_split(tasks["stsb"], root, "test").slice(1378).to_pylist()[0]["text_b"] == (
        "North Korea Delegation Meets With South Korean Officials")
    assert first(tasks["rte"], root, "train") == {
        "idx": 0, "premise": "No Weapons of Mass Destruction Found in Iraq Yet.",
        "hypothesis": "Weapons of Mass Destruction Found in Iraq.", "label": 1}
    assert read_task_split(tasks["rte"], root, "train").column("label").value_counts().to_pylist() \
        == [{"values": 1, "counts": 1241}, {"values": 0, "counts": 1249}]
    assert first(tasks["qnli"], root, "dev") == {  # premise = question, hypothesis = sentence
        "idx": 0, "premise": "What came into force after the new constitution was herald?",
        "hypothesis": "As of that day, the new constitution heralding the Second Republic came "
                      "into force.",
        "label": 0}


def test_real_qnli_train_is_reported_missing(tasks: dict[str, TaskParams],
                                             shared_data: Path) -> None:
    train = shared_data / "glue" / "QNLI" / "train.tsv"
    assert missing_files(tasks["qnli"], shared_data) == [train]
    with raises(FileNotFoundError, f"expected at {train}"):
        read_task_split(tasks["qnli"], shared_data, "train")
    assert missing_files(tasks["rte"], shared_data) == []


def test_real_story_cloze(tasks: dict[str, TaskParams], shared_data: Path) -> None:
    assert first(tasks["story_cloze"], shared_data, "train") == {
        "idx": 0,
        "context": "Rick grew up in a troubled household. He never found good support in family, "
                   "and turned to gangs. It wasn't long before Rick got shot in a robbery. The "
                   "incident caused him to turn a new leaf.",
        "question": "",
        "choices": ["He is happy now.", "He joined a gang."],
        "label": 0}
    test = read_task_split(tasks["story_cloze"], shared_data, "test")  # no final newline
    assert test.slice(0, 1).to_pylist()[0]["label"] == 1
    assert test.column("label").value_counts().to_pylist() == [
        {"values": 1, "counts": 911}, {"values": 0, "counts": 960}]


def test_story_cloze_holdout_is_the_original_split(tasks: dict[str, TaskParams],
                                                   shared_data: Path) -> None:
    task = tasks["story_cloze"]
    assert task.holdout is not None
    table = read_task_split(task, shared_data, "train")
    train, dev = holdout_split(table, task.holdout.size, task.holdout.seed)
    assert (train.num_rows, dev.num_rows) == (1_497, 374)
    again = holdout_split(table, task.holdout.size, task.holdout.seed)
    assert again[0].equals(train) and again[1].equals(dev)
    # what train_test_split did when OpenAI's code called it: one seeded permutation, the first
    # `test_size` rows of it for dev
    order = np.random.RandomState(3535999445).permutation(1_871)
    assert dev.column("idx").to_pylist() == order[:374].tolist()
    assert train.column("idx").to_pylist() == order[374:].tolist()
    assert dev.slice(0, 1).to_pylist() == table.slice(int(order[0]), 1).to_pylist()


# -- the bundled sample ----------------------------------------------------------------------------

SAMPLE_TASKS = ["sst2", "cola", "rte", "mrpc", "stsb", "story_cloze"]


@pytest.mark.parametrize("name", SAMPLE_TASKS)
def test_bundled_sample_reads(tasks: dict[str, TaskParams], name: str) -> None:
    task = tasks[name]
    assert missing_files(task, SAMPLE) == []
    for split in task.files:
        table = read_task_split(task, SAMPLE, split)
        assert table.num_rows >= 20, split
        assert table.column("label").null_count in (0, table.num_rows)
    if task.holdout is not None:
        train, dev = holdout_split(read_task_split(task, SAMPLE, "train"), task.holdout.size,
                                   task.holdout.seed)
        assert dev.num_rows == task.holdout.size and train.num_rows > 0


# -- GLUE formats, synthetic ----------------------------------------------------------------------


def test_cola_layouts_and_errors(tasks: dict[str, TaskParams], tmp_path: Path) -> None:
    task = tasks["cola"]
    write(tmp_path, "glue/CoLA/train.tsv", tsv(("gj04", 1, "", "Fine."),
                                               ("r-67", 0, "*", 'They said "quote this')),
          bom=True)
    write(tmp_path, "glue/CoLA/test.tsv", tsv(("index", "sentence"), (7, "Bill whistled.")))
    assert read(task, tmp_path, "train") == {
        "idx": [0, 1], "text": ["Fine.", 'They said "quote this'], "label": [1, 0]}
    assert read(task, tmp_path, "test") == {"idx": [7], "text": ["Bill whistled."],
                                            "label": [None]}
    path = write(tmp_path, "glue/CoLA/dev.tsv", tsv(("gj04", 1, "", "Fine."),
                                                    ("gj04", "x", "*", "Bad.")))
    with raises(DataFormatError, f"{path}:2: label 'x' is not one of ['0', '1']"):
        read_task_split(task, tmp_path, "dev")
    write(tmp_path, "glue/CoLA/dev.tsv", tsv(("gj04", 1, "Fine.")))
    with raises(DataFormatError, f"{path}:1: expected 4 fields, got 3"):
        read_task_split(task, tmp_path, "dev")


def test_missing_file_names_the_expected_path(tasks: dict[str, TaskParams],
                                              tmp_path: Path) -> None:
    expected = tmp_path / "glue" / "SST-2" / "dev.tsv"
    with raises(FileNotFoundError, f"SST-2: dev split expected at {expected}"):
        read_task_split(tasks["sst2"], tmp_path, "dev")
    assert missing_files(tasks["sst2"], tmp_path) == [
        tmp_path / "glue" / "SST-2" / f"{split}.tsv" for split in ("train", "dev", "test")]
    with raises(ValueError, "no 'dev_x' split"):
        read_task_split(tasks["sst2"], tmp_path, "dev_x")


def test_unlabelled_rows_outside_test_are_refused(tasks: dict[str, TaskParams],
                                                  tmp_path: Path) -> None:
    path = write(tmp_path, "glue/SST-2/dev.tsv", tsv(("index", "sentence"), (0, "no label")))
    with raises(DataFormatError, f"{path}: rows without a label in the dev split"):
        read_task_split(tasks["sst2"], tmp_path, "dev")


def test_header_without_a_needed_column(tasks: dict[str, TaskParams], tmp_path: Path) -> None:
    path = write(tmp_path, "glue/RTE/train.tsv", tsv(("index", "premise", "sentence2", "label"),
                                                     (0, "a", "b", "entailment")))
    with raises(DataFormatError, f"{path}:1: no column 'sentence1' (the file's columns: index, "
                                 "premise, sentence2, label)"):
        read_task_split(tasks["rte"], tmp_path, "train")


QQP_HEADER = ("id", "qid1", "qid2", "question1", "question2", "is_duplicate")


def test_qqp(tasks: dict[str, TaskParams], tmp_path: Path) -> None:
    task = tasks["qqp"]
    write(tmp_path, "glue/QQP/train.tsv", tsv(
        QQP_HEADER,
        (133273, 213221, 213222, "How is the life of a math student?",
         "Which level of prepration is enough for the exam jlpt5?", 0),
        (402555, 536040, 536041, 'How do I control my "horny" emotions?',
         "How do you control your horniness?", 1)))
    write(tmp_path, "glue/QQP/test.tsv", tsv(
        ("id", "question1", "question2"),
        (0, "Why do rockets look white?", "Why are rockets white?")))
    assert read(task, tmp_path, "train") == {
        "idx": [133273, 402555],
        "text_a": ["How is the life of a math student?", 'How do I control my "horny" emotions?'],
        "text_b": ["Which level of prepration is enough for the exam jlpt5?",
                   "How do you control your horniness?"],
        "label": [0, 1]}
    assert read(task, tmp_path, "test") == {
        "idx": [0], "text_a": ["Why do rockets look white?"],
        "text_b": ["Why are rockets white?"], "label": [None]}
    # some copies of QQP's train.tsv hold rows cut short by a stray newline: reported, not skipped
    path = write(tmp_path, "glue/QQP/dev.tsv", tsv(
        QQP_HEADER, (1, 2, 3, "What is a good question?", "What makes a good question?", 1),
        (4, 5, 6, "A question cut short by a newline"), ("in the middle?", 0)))
    with raises(DataFormatError, f"{path}:3: expected 6 fields, got 4"):
        read_task_split(task, tmp_path, "dev")


STSB_HEADER = ("index", "genre", "filename", "year", "old_index", "source1", "source2",
               "sentence1", "sentence2", "score")


def stsb_row(index: int, score: str) -> tuple[object, ...]:
    return (index, "main-captions", "MSRvid", "2012test", "0000", "none", "none", "A man.",
            "A man.", score)


@pytest.mark.parametrize("score", ["-40", "7.5", "1e9", "nan", "inf", "high", "-0.001"])
def test_stsb_score_outside_0_to_5(tasks: dict[str, TaskParams], tmp_path: Path,
                                   score: str) -> None:
    path = write(tmp_path, "glue/STS-B/dev.tsv", tsv(STSB_HEADER, stsb_row(0, "5.000"),
                                                     stsb_row(1, score)))
    with raises(DataFormatError, f"{path}:3: score '{score}' is not a number from 0 to 5"):
        read_task_split(tasks["stsb"], tmp_path, "dev")


def test_stsb_score_bounds_are_in_range(tasks: dict[str, TaskParams], tmp_path: Path) -> None:
    write(tmp_path, "glue/STS-B/dev.tsv", tsv(STSB_HEADER, stsb_row(0, "5.000"),
                                              stsb_row(1, "0.000")))
    assert read(tasks["stsb"], tmp_path, "dev")["label"] == [5.0, 0.0]


def test_scores_and_class_labels_are_not_mixed(tasks: dict[str, TaskParams],
                                               tmp_path: Path) -> None:
    stsb = tasks["stsb"].model_copy(update={"labels": ["0", "1"]})
    with raises(ValueError, "STS-B: reader 'glue_stsb' reads scores, not labels ['0', '1']"):
        read_task_split(stsb, tmp_path, "dev")
    mrpc = tasks["mrpc"].model_copy(update={"labels": None})
    with raises(ValueError, "MRPC: reader 'glue_mrpc' reads class labels: give the task its"):
        read_task_split(mrpc, tmp_path, "dev")


def test_glue_index_is_a_whole_number_once(tasks: dict[str, TaskParams], tmp_path: Path) -> None:
    path = write(tmp_path, "glue/SST-2/test.tsv", tsv(("index", "sentence"), (0, "a"), (-1, "b")))
    with raises(DataFormatError, f"{path}:3: index '-1' is not a whole number from 0"):
        read_task_split(tasks["sst2"], tmp_path, "test")
    write(tmp_path, "glue/SST-2/test.tsv", tsv(("index", "sentence"), (7, "a"), (8, "b"),
                                               (7, "c")))
    with raises(DataFormatError, f"{path}:4: index 7 again (first on line 2)"):
        read_task_split(tasks["sst2"], tmp_path, "test")


# -- empty texts, files without rows ------------------------------------------------------------

STORY_HEADER = ("InputStoryid", "InputSentence1", "InputSentence2", "InputSentence3",
                "InputSentence4", "RandomFifthSentenceQuiz1", "RandomFifthSentenceQuiz2",
                "AnswerRightEnding")
STORY_TRAIN = "multiple_choice/story_cloze/cloze_test_val__spring2016.csv"


def story(answer: str = "1", ending: str = "He was glad.") -> str:
    return ",".join(["62a25058", "Sam went out.", "It rained.", "He had an umbrella.",
                     '"Still, he got wet."', ending, "He flew away.", answer])


def stories(*rows: str) -> str:
    return "\n".join([",".join(STORY_HEADER), *rows]) + "\n"


EMPTY_TEXTS = [  # (task, split, file, content, the line and column at fault)
    ("sst2", "train", "glue/SST-2/train.tsv", tsv(("sentence", "label"), ("fine", 1), (" ", 0)),
     "3: 'sentence'"),
    ("cola", "dev", "glue/CoLA/dev.tsv", tsv(("gj04", 1, "", "Fine."), ("gj04", 0, "*", "")),
     "2: 'sentence'"),
    ("rte", "dev", "glue/RTE/dev.tsv", tsv(("index", "sentence1", "sentence2", "label"),
                                          (0, "A dog barks.", "", "entailment")),
     "2: 'sentence2'"),
    ("mrpc", "test", "glue/MRPC/test.tsv",
     tsv(("index", "#1 ID", "#2 ID", "#1 String", "#2 String"), (0, 1, 2, "", "B.")),
     "2: '#1 String'"),
    ("story_cloze", "train", STORY_TRAIN, stories(story(), story(ending='""')),
     "3: 'RandomFifthSentenceQuiz1'"),
]


@pytest.mark.parametrize(("name", "split", "rel", "content", "where"), EMPTY_TEXTS)
def test_empty_text_where_the_release_has_none(tasks: dict[str, TaskParams], tmp_path: Path,
                                               name: str, split: str, rel: str, content: str,
                                               where: str) -> None:
    path = write(tmp_path, rel, content)
    with raises(DataFormatError, f"{path}:{where} is empty (the release has no empty texts)"):
        read_task_split(tasks[name], tmp_path, split)


def test_empty_text_where_the_release_has_some(tasks: dict[str, TaskParams],
                                               tmp_path: Path) -> None:
    write(tmp_path, "glue/QQP/train.tsv", tsv(QQP_HEADER, (1, 2, 3, "How can I code?", "", 0)))
    assert read(tasks["qqp"], tmp_path, "train")["text_b"] == [""]
    write(tmp_path, "glue/MNLI/train.tsv", tsv((*MNLI_COLUMNS, "label1", "gold_label"),
                                               mnli_row(0, "A premise.", "", "neutral",
                                                        "neutral")))
    assert read(tasks["mnli"], tmp_path, "train")["hypothesis"] == [""]


NO_ROWS = [  # (task, split, file, content): a header at most
    ("sst2", "train", "glue/SST-2/train.tsv", "sentence\tlabel\n"),
    ("sst2", "dev", "glue/SST-2/dev.tsv", "sentence\tlabel\n\n\n"),
    ("sst2", "test", "glue/SST-2/test.tsv", "index\tsentence\n"),
    ("cola", "train", "glue/CoLA/train.tsv", ""),
    ("stsb", "dev", "glue/STS-B/dev.tsv", tsv(STSB_HEADER)),
    ("story_cloze", "train", STORY_TRAIN, stories()),
    ("scitail", "dev", "nli/SciTailV1.1/tsv_format/scitail_1.0_dev.tsv", "\n"),
]


@pytest.mark.parametrize(("name", "split", "rel", "content"), NO_ROWS)
def test_file_without_rows(tasks: dict[str, TaskParams], tmp_path: Path, name: str, split: str,
                           rel: str, content: str) -> None:
    path = write(tmp_path, rel, content)
    task = tasks[name]
    with raises(DataFormatError, f"{path}: no rows to read into {task.title}'s {split} split"):
        read_task_split(task, tmp_path, split)


def test_jsonl_without_a_gold_label_has_no_rows(tasks: dict[str, TaskParams],
                                                tmp_path: Path) -> None:
    path = write(tmp_path, "nli/snli_1.0/snli_1.0_dev.jsonl", snli_line("A.", "B.", "-"))
    with raises(DataFormatError, f"{path}: no rows to read into SNLI's dev split"):
        read_task_split(tasks["snli"], tmp_path, "dev")


@pytest.mark.parametrize("answer", ["3", "0", "", "1.0", "A"])
def test_story_cloze_answer_is_1_or_2(tasks: dict[str, TaskParams], tmp_path: Path,
                                      answer: str) -> None:
    path = write(tmp_path, STORY_TRAIN, stories(story("2"), story(answer)))
    with raises(DataFormatError, f"{path}:3: label '{answer}' is not one of ['1', '2']"):
        read_task_split(tasks["story_cloze"], tmp_path, "train")


MNLI_COLUMNS = ("index", "promptID", "pairID", "genre", "sentence1_binary_parse",
                "sentence2_binary_parse", "sentence1_parse", "sentence2_parse", "sentence1",
                "sentence2")


def mnli_row(index: int, premise: str, hypothesis: str, *labels: str) -> tuple[object, ...]:
    parses = (f"( {premise} )", f"( {hypothesis} )", f"(ROOT {premise})", f"(ROOT {hypothesis})")
    return (index, 31193, f"31193{index}n", "government", *parses, premise, hypothesis, *labels)


def test_mnli(tasks: dict[str, TaskParams], tmp_path: Path) -> None:
    task = tasks["mnli"]
    write(tmp_path, "glue/MNLI/train.tsv", tsv(
        (*MNLI_COLUMNS, "label1", "gold_label"),
        mnli_row(0, "Conceptually cream skimming has two basic dimensions.",
                 "Product and geography are what make cream skimming work.", "neutral",
                 "neutral"),
        mnli_row(1, "you know during the season", "You lose the things.", "entailment",
                 "entailment")))
    dev_header = (*MNLI_COLUMNS, "label1", "label2", "label3", "label4", "label5", "gold_label")
    write(tmp_path, "glue/MNLI/dev_matched.tsv", tsv(
        dev_header, mnli_row(0, "The new rights are nice.", "Everyone hates them.",
                             "contradiction", "contradiction", "neutral", "contradiction",
                             "contradiction", "contradiction")))
    path = write(tmp_path, "glue/MNLI/dev_mismatched.tsv", tsv(
        dev_header, mnli_row(0, "Your gift is appreciated.", "Hundreds of gifts.", "neutral",
                             "neutral", "neutral", "neutral", "neutral", "unknown")))
    write(tmp_path, "glue/MNLI/test_mismatched.tsv", tsv(
        MNLI_COLUMNS, mnli_row(0, "Hierbas, ans seco.", "A drink.")))
    assert read(task, tmp_path, "train") == {
        "idx": [0, 1],
        "premise": ["Conceptually cream skimming has two basic dimensions.",
                    "you know during the season"],
        "hypothesis": ["Product and geography are what make cream skimming work.",
                       "You lose the things."],
        "label": [1, 0]}
    assert read(task, tmp_path, "dev")["label"] == [2]
    assert read(task, tmp_path, "test_mismatched")["label"] == [None]
    with raises(DataFormatError, f"{path}:2: label 'unknown' is not one of"):
        read_task_split(task, tmp_path, "dev_mismatched")
    assert missing_files(task, tmp_path) == [tmp_path / "glue" / "MNLI" / "test_matched.tsv"]


# -- SNLI / MultiNLI JSON lines and SciTail TSV -------------------------------------------------


def snli_line(sentence1: str, sentence2: str, gold: str) -> str:
    return json.dumps({"annotator_labels": [gold], "captionID": "3416050480.jpg#4",
                       "gold_label": gold, "pairID": "3416050480.jpg#4r1n",
                       "sentence1": sentence1, "sentence1_binary_parse": "( x )",
                       "sentence1_parse": "(ROOT x)", "sentence2": sentence2,
                       "sentence2_binary_parse": "( y )", "sentence2_parse": "(ROOT y)"}) + "\n"


def test_snli_jsonl(tasks: dict[str, TaskParams], tmp_path: Path,
                    caplog: pytest.LogCaptureFixture) -> None:
    task = tasks["snli"]
    write(tmp_path, "nli/snli_1.0/snli_1.0_dev.jsonl", "".join([
        snli_line("A person on a horse jumps.", "A person is outdoors.", "entailment"),
        snli_line("Two women are embracing.", "The sisters are hugging.", "-"),
        snli_line("Children smiling.", "They are frowning.", "contradiction"),
    ]))
    with caplog.at_level(logging.INFO, logger="gpt1.downstream.readers"):
        assert read(task, tmp_path, "dev") == {
            "idx": [0, 1], "premise": ["A person on a horse jumps.", "Children smiling."],
            "hypothesis": ["A person is outdoors.", "They are frowning."], "label": [0, 2]}
    assert "2 pairs read, 1 without a gold label (-) dropped" in caplog.text
    path = write(tmp_path, "nli/snli_1.0/snli_1.0_train.jsonl",
                 snli_line("A.", "B.", "neutral") + '{"gold_label": "neutral", "sentence1": "A."'
                 "\n")
    with raises(DataFormatError, f"{path}:2: not a JSON object"):
        read_task_split(task, tmp_path, "train")
    path.write_text(json.dumps({"gold_label": "neutral", "sentence1": "A."}) + "\n")
    with raises(DataFormatError, f"{path}:1: no key 'sentence2' (the file's keys: gold_label, "
                                 "sentence1)"):
        read_task_split(task, tmp_path, "train")
    path.write_text(json.dumps({"gold_label": "neutral", "sentence1": "A.", "Sentence2": "B."})
                    + "\n")
    with raises(DataFormatError, "sentence1, Sentence2; the closest: 'Sentence2')"):
        read_task_split(task, tmp_path, "train")
    path.write_text(json.dumps({"gold_label": "neutral", "sentence1": "A.", "sentence2": 2})
                    + "\n")
    with raises(DataFormatError, f"{path}:1: key 'sentence2': expected a string, got 2"):
        read_task_split(task, tmp_path, "train")
    path.write_text(snli_line("A.", "B.", "neutral") + snli_line("A.", "B.", "entails"))
    with raises(DataFormatError, f"{path}:2: label 'entails' is not one of"):
        read_task_split(task, tmp_path, "train")


def test_scitail_tsv(tasks: dict[str, TaskParams], tmp_path: Path) -> None:
    task = tasks["scitail"]
    write(tmp_path, "nli/SciTailV1.1/tsv_format/scitail_1.0_train.tsv", tsv(
        ("Pluto rotates once on its axis every 6.39 Earth days.",
         "Earth rotates on its axis once times in one day.", "neutral"),
        ('A "wave" is a disturbance that travels.', "Waves carry energy.", "entails")))
    assert read(task, tmp_path, "train") == {
        "idx": [0, 1],
        "premise": ["Pluto rotates once on its axis every 6.39 Earth days.",
                    'A "wave" is a disturbance that travels.'],
        "hypothesis": ["Earth rotates on its axis once times in one day.", "Waves carry energy."],
        "label": [1, 0]}
    path = write(tmp_path, "nli/SciTailV1.1/tsv_format/scitail_1.0_dev.tsv", tsv(
        ("A.", "B.", "entails"), ("A.", "B.", "contradiction")))
    with raises(DataFormatError, f"{path}:2: label 'contradiction' is not one of"):
        read_task_split(task, tmp_path, "dev")


# -- RACE --------------------------------------------------------------------------------------


def race_article(name: str, questions: list[str], answers: list[str]) -> str:
    return json.dumps({"answers": answers,
                       "options": [[f"{q} {letter}" for letter in "ABCD"] for q in questions],
                       "questions": questions, "article": f"The article of {name}.",
                       "id": name})


def test_race_folders(tasks: dict[str, TaskParams], tmp_path: Path) -> None:
    task = tasks["race"]
    base = "multiple_choice/RACE/train"
    write(tmp_path, f"{base}/middle/2.txt", race_article("middle2.txt", ["Why?"], ["C"]))
    write(tmp_path, f"{base}/middle/10.txt",
          race_article("middle10.txt", ["Who?", "The _ was red."], ["A", "D"]))
    write(tmp_path, f"{base}/middle/notes.md", "not an article")
    write(tmp_path, f"{base}/high/1.txt", race_article("high1.txt", ["When?"], ["B"]))
    assert read(task, tmp_path, "train") == {  # files in sorted order, middle before high
        "idx": [0, 1, 2, 3],
        "context": ["The article of middle10.txt."] * 2 + ["The article of middle2.txt.",
                                                           "The article of high1.txt."],
        "question": ["Who?", "The _ was red.", "Why?", "When?"],
        "choices": [[f"{q} {x}" for x in "ABCD"] for q in ("Who?", "The _ was red.", "Why?",
                                                           "When?")],
        "label": [0, 3, 2, 1]}


def test_race_errors(tasks: dict[str, TaskParams], tmp_path: Path) -> None:
    task = tasks["race"]
    folder = tmp_path / "multiple_choice" / "RACE" / "dev" / "high"
    folder.mkdir(parents=True)
    with raises(FileNotFoundError, f"{folder}: no RACE article files"):
        read_task_split(task, tmp_path, "dev_high")
    path = write(folder, "1.txt", race_article("high1.txt", ["Why?", "Who?"], ["A", "E"]))
    with raises(DataFormatError, f"{path}: answers[1]: label 'E' is not one of ['A', 'B'"):
        read_task_split(task, tmp_path, "dev_high")
    path.write_text(race_article("high1.txt", ["Why?", "Who?"], ["A"]))
    with raises(DataFormatError, f"{path}: keys 'questions', 'options' and "):
        read_task_split(task, tmp_path, "dev_high")
    path.write_text(race_article("high1.txt", [], []))  # an article without questions
    with raises(DataFormatError, "must be lists of one length, not empty"):
        read_task_split(task, tmp_path, "dev_high")
    for answer in ("a", 1, None):
        path.write_text(race_article("high1.txt", ["Why?"], [answer]))  # type: ignore[list-item]
        with raises(DataFormatError, f"{path}: answers[0]: label {answer!r} is not one of"):
            read_task_split(task, tmp_path, "dev_high")
    record = json.loads(race_article("high1.txt", ["Why?"], ["A"]))
    for options in (["only", "three", "options"], list("ABCDE"), ["a", "b", "c", 4]):
        record["options"][0] = options
        path.write_text(json.dumps(record))
        with raises(DataFormatError, f"{path}: options[0]: expected 4 strings"):
            read_task_split(task, tmp_path, "dev_high")
    path.write_text('{"article": "x",\n "answers": [}')
    with raises(DataFormatError, f"{path}:2: not JSON"):
        read_task_split(task, tmp_path, "dev_high")


# -- holdout ---------------------------------------------------------------------------------


def test_holdout_split_keeps_every_row_once() -> None:
    table = pa.table({"idx": list(range(50)), "label": [i % 2 for i in range(50)]})
    train, dev = holdout_split(table, 10, seed=1)
    assert (train.num_rows, dev.num_rows) == (40, 10)
    assert sorted(train.column("idx").to_pylist() + dev.column("idx").to_pylist()) == \
        list(range(50))
    assert holdout_split(table, 10, seed=2)[1] != dev


# -- bytes that are not UTF-8, in every file format -------------------------------------------

BAD = "\udcff"  # written as the lone byte 0xff

NON_UTF8 = [  # (task, split, file, content, line of the bad byte)
    ("sst2", "train", "glue/SST-2/train.tsv", tsv(("sentence", "label"), ("ok", 1),
                                                  (f"caf{BAD}", 0)), 3),
    ("cola", "train", "glue/CoLA/train.tsv", tsv(("gj04", 1, "", f"Fine{BAD}.")), 1),
    ("story_cloze", "train", STORY_TRAIN, stories(story(), story(ending=f"Bad{BAD}.")), 3),
    ("snli", "dev", "nli/snli_1.0/snli_1.0_dev.jsonl",
     snli_line("A.", "B.", "neutral") + snli_line("Az.", "B.", "neutral").replace("z", BAD), 2),
    ("scitail", "dev", "nli/SciTailV1.1/tsv_format/scitail_1.0_dev.tsv",
     tsv(("A.", "B.", "entails"), ("A.", f"B{BAD}.", "neutral")), 2),
    ("race", "dev_high", "multiple_choice/RACE/dev/high/1.txt",
     race_article("high1.txt", ["Why?"], ["A"]).replace("The article", f"\nThe {BAD}"), 2),
]


@pytest.mark.parametrize(("name", "split", "rel", "content", "line"), NON_UTF8)
def test_non_utf8_names_file_line_and_byte(tasks: dict[str, TaskParams], tmp_path: Path,
                                           name: str, split: str, rel: str, content: str,
                                           line: int) -> None:
    path = tmp_path / rel
    path.parent.mkdir(parents=True)
    raw = content.encode("utf-8", "surrogateescape")
    path.write_bytes(raw)
    offset = raw.index(b"\xff")
    with raises(DataFormatError, f"{path}:{line}: not UTF-8 text (byte {offset}: 0xff)"):
        read_task_split(tasks[name], tmp_path, split)
