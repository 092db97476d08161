"""tasks.ingest: a bad task file or book fails the stage at once, in one line naming the file
(and the line, or the params key); books without blank lines still become documents."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from gpt1.config import Params, parse_params, read_yaml
from gpt1.errors import DataFormatError
from tasks import ingest
from tests.conftest import REPO, run

SAMPLE = REPO / "gpt1" / "sample_data"
STORIES = "multiple_choice/story_cloze/cloze_test_val__spring2016.csv"


def raw_params(root: Path, tasks: list[str] | str, **ingest: object) -> dict:
    """The repository's params.yaml on data root `root`, one sample book, `tasks` requested."""
    raw = read_yaml((REPO / "params.yaml").read_text(encoding="utf-8"))
    raw["ingest"].update({"root": str(root), "corpus": ["corpus/01_*.txt"], **ingest})
    raw["finetune"]["tasks"] = tasks
    return raw


def params(root: Path, tasks: list[str] | str, **ingest: object) -> Params:
    return parse_params(raw_params(root, tasks, **ingest))


@pytest.fixture()
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the bundled sample as the data root; the stage writes its outputs beside it."""
    monkeypatch.chdir(tmp_path)
    return Path(shutil.copytree(SAMPLE, tmp_path / "root"))


def rows(task: str) -> dict[str, int]:
    return json.loads(Path("data/raw/tasks", task, "status.json").read_text())["rows"]


def keep_lines(path: Path, count: int) -> None:
    path.write_text("".join(path.read_text(encoding="utf-8").splitlines(True)[:count]),
                    encoding="utf-8")


@pytest.mark.parametrize("split", ["train", "dev", "test"])
def test_split_with_a_header_only_fails_naming_the_file(root: Path, split: str) -> None:
    path = root / "glue" / "SST-2" / f"{split}.tsv"
    keep_lines(path, 1)
    with pytest.raises(DataFormatError,
                       match=re.escape(f"{path}: no rows to read into SST-2's {split} split")):
        ingest.run(params(root, ["sst2"]))
    assert not Path("data/raw/tasks").exists()  # nothing half-written


def test_caps_leave_rows(root: Path) -> None:
    ingest.run(params(root, ["sst2"], max_train_examples=1, max_dev_examples=1))
    assert rows("sst2") == {"train": 1, "dev": 1, "test": 200}
    ingest.run(params(root, ["sst2"], max_dev_examples=2, max_test_examples=3))
    assert rows("sst2") == {"train": 2000, "dev": 2, "test": 3}
    assert pq.read_table("data/raw/tasks/sst2/test.parquet").column("idx").to_pylist() == [0, 1, 2]


def test_holdout_larger_than_the_train_file(root: Path) -> None:
    keep_lines(root / STORIES, 31)  # the header and 30 stories
    with pytest.raises(ValueError) as err:
        ingest.run(params(root, ["story_cloze"]))
    assert str(err.value) == (
        "tasks.story_cloze.holdout.size: 374 dev rows would leave none for train: the train "
        f"split ({root / STORIES}) has 30 rows; hold out fewer")
    raw = raw_params(root, ["story_cloze"])
    raw["tasks"]["story_cloze"]["holdout"]["size"] = 29  # the train split keeps one row
    ingest.run(parse_params(raw))
    assert rows("story_cloze") == {"train": 1, "dev": 29, "test": 20}


def test_non_utf8_book_names_line_and_byte(root: Path) -> None:
    book = root / "corpus" / "01_the_lantern_at_greywater.txt"
    text = book.read_bytes()
    at = text.index(b"by Ada") + 3  # on line 3, after the title and a blank line
    book.write_bytes(text[:at] + b"\x92" + text[at:])  # a cp1252 quote
    with pytest.raises(DataFormatError,
                       match=re.escape(f"{book}:3: not UTF-8 text (byte {at}: 0x92)")):
        ingest.run(params(root, ["sst2"]))


def test_book_without_blank_lines_becomes_documents_of_doc_chars(root: Path) -> None:
    sentences = " ".join(f"Line {i} of a book that never leaves a blank line." for i in range(4000))
    (root / "corpus" / "01_one_line.txt").write_text(sentences, encoding="utf-8")
    ingest.run(params(root, ["sst2"], corpus=["corpus/01_one_line.txt"], doc_chars=2_000))
    docs = pq.read_table("data/raw/corpus/00000.parquet").column("text").to_pylist()
    assert len(docs) > len(sentences) // 2_000
    assert max(map(len, docs)) <= 2_000
    assert " ".join(docs).split() == sentences.split()


def test_bad_score_exits_2_with_one_line(root: Path, tmp_path: Path) -> None:
    """The stage as DVC runs it: STS-B's 1e9 once trained to a loss of 1.6e16."""
    train = root / "glue" / "STS-B" / "train.tsv"
    lines = train.read_text(encoding="utf-8").splitlines(True)
    fields = lines[3].rstrip("\n").split("\t")
    lines[3] = "\t".join([*fields[:-1], "1e9"]) + "\n"
    train.write_text("".join(lines), encoding="utf-8")
    params_file = tmp_path / "params.yaml"
    params_file.write_text(json.dumps(raw_params(root, ["stsb"])), encoding="utf-8")  # YAML 1.2
    env = {"PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = run([sys.executable, "-m", "tasks.ingest", "--params", str(params_file)],
                       tmp_path, env=env, check=False)
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if "failed" in line]
    assert len(errors) == 1 and errors[0].endswith(
        f"stage ingest failed: {train}:4: score '1e9' is not a number from 0 to 5"), proc.stderr


def test_each_task_folder_says_whether_it_runs(root: Path) -> None:
    """gpt1.jobs.ingest: a status.json in every registry task's folder, as finetune,
    ablation, transfer and zero_shot read it (byte for byte as they always have)."""
    ingest.run(params(root, ["sst2"], max_train_examples=2, max_dev_examples=3))
    assert Path("data/raw/tasks/sst2/status.json").read_text() == (
        '{\n  "run": true,\n  "rows": {\n    "train": 2,\n    "dev": 3,\n    "test": 200\n  }\n}\n')
    assert Path("data/raw/tasks/cola/status.json").read_text() == (
        '{\n  "run": false,\n  "reason": "not in finetune.tasks"\n}\n')
    assert sorted(os.listdir("data/raw/tasks/sst2")) == [
        "dev.parquet", "registry_entry.json", "status.json", "test.parquet", "train.parquet"]
    # the entry the splits were read with: the task's stages depend on the folder, not the key
    entry = json.loads(Path("data/raw/tasks/sst2/registry_entry.json").read_text())
    raw = read_yaml((REPO / "params.yaml").read_text(encoding="utf-8"))["tasks"]["sst2"]
    assert {key: entry[key] for key in raw} == raw
    assert os.listdir("data/raw/tasks/cola") == ["status.json"]
    assert pq.read_table("data/raw/tasks/sst2/dev.parquet").num_rows == 3
    assert sorted(os.listdir("data/raw/tasks")) == sorted(read_yaml(
        (REPO / "params.yaml").read_text(encoding="utf-8"))["tasks"])


def test_a_task_under_all_without_data_does_not_run(root: Path) -> None:
    shutil.rmtree(root / "glue" / "CoLA")
    ingest.run(params(root, "all"))
    status = json.loads(Path("data/raw/tasks/cola/status.json").read_text())
    assert status["run"] is False and status["reason"].startswith(f"data not found at {root}/")
    with pytest.raises(FileNotFoundError, match=r"^task cola \(in finetune.tasks\): data not "
                                                r"found at .*; see tasks.cola.files$"):
        ingest.run(params(root, ["cola"]))


def test_a_data_root_that_is_no_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError,
                       match=r"^ingest.root: data root nowhere is not a directory$"):
        ingest.run(params(Path("nowhere"), ["sst2"]))
    assert not Path("data").exists()
