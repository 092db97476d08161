"""gpt1.downstream.tables and the `table` reader: ordinary CSV, TSV, JSON Lines and Parquet files
as users write them (header, quoted fields over several lines, CRLF, a byte-order mark, no final
newline, blank lines), read in bounded batches, every bad row named by file and line."""

from __future__ import annotations

import re
from contextlib import AbstractContextManager
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpt1.config import Family, TaskParams
from gpt1.downstream.readers import missing_files, read_task_split
from gpt1.downstream.tables import (
    TableBatch,
    iter_batches,
    select_fields,
    table_columns,
    table_format,
)
from gpt1.errors import DataFormatError, InputError

BOM = b"\xef\xbb\xbf"


def raises(message: str) -> AbstractContextManager[pytest.ExceptionInfo[Exception]]:
    """A DataFormatError (an InputError) whose message is exactly `message`."""
    return pytest.raises(InputError, match=f"^{re.escape(message)}$")


def write(path: Path, data: bytes | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


def rows(path: Path, fmt: str | None = None, batch_rows: int = 4096,
         ) -> tuple[list[dict[str, object]], list[str]]:
    """Every row of the file and where it is, over all batches."""
    table_rows: list[dict[str, object]] = []
    where: list[str] = []
    for batch in iter_batches(path, fmt, batch_rows):
        table_rows += batch.table.to_pylist()
        where += batch.where
    return table_rows, where


# -- CSV and TSV ---------------------------------------------------------------------------------

# A header with a BOM and CRLF; a quoted field over two lines with doubled quotes (and, for the
# TSV, a tab inside quotes); a blank line; a line ending in a bare CR, one in LF; another blank
# line; the last row without a final newline.
QUIRKS = {
    "csv": (BOM + b'text,label\r\n"He said ""hi""\r\nand left",pos\r\n\r\nplain,neg\r'
            b'next,neg\n\n"a, b",pos'),
    "tsv": (BOM + b'text\tlabel\r\n"He said ""hi""\r\nand left"\tpos\r\n\r\nplain\tneg\r'
            b'next\tneg\n\n"a\tb"\tpos'),
}


@pytest.mark.parametrize("fmt", ["csv", "tsv"])
def test_delimited_quirks(tmp_path: Path, fmt: str) -> None:
    path = write(tmp_path / f"reviews.{fmt}", QUIRKS[fmt])
    table_rows, where = rows(path)
    last = "a, b" if fmt == "csv" else "a\tb"
    assert table_rows == [{"text": 'He said "hi"\r\nand left', "label": "pos"},
                          {"text": "plain", "label": "neg"},
                          {"text": "next", "label": "neg"},
                          {"text": last, "label": "pos"}]
    # each row's first line, counted after the two-line field and the blank lines
    assert where == [f"{path}:2", f"{path}:5", f"{path}:6", f"{path}:8"]
    assert table_columns(path) == ["text", "label"]


def test_csv_columns_are_strings(tmp_path: Path) -> None:
    path = write(tmp_path / "a.csv", "n,flag\n1,true\n")
    batch = next(iter_batches(path))
    assert batch.table.schema == pa.schema([("n", pa.string()), ("flag", pa.string())])
    assert batch.path == path


@pytest.mark.parametrize(("fmt", "text"), [
    ("csv", "id,text\n0,a\n1,b\n2,c\n3,d\n4,e\n"),
    ("jsonl", "".join(f'{{"id": {i}, "text": "{t}"}}\n' for i, t in enumerate("abcde"))),
])
def test_batches_are_bounded_and_cover_every_row(tmp_path: Path, fmt: str, text: str) -> None:
    path = write(tmp_path / f"rows.{fmt}", text)
    batches = list(iter_batches(path, batch_rows=2))
    assert [b.table.num_rows for b in batches] == [2, 2, 1]
    assert [t for b in batches for t in b.table.column("text").to_pylist()] == list("abcde")
    first_line = 2 if fmt == "csv" else 1
    assert [w for b in batches for w in b.where] == [f"{path}:{n}"
                                                     for n in range(first_line, first_line + 5)]


def test_batches_are_read_lazily(tmp_path: Path) -> None:
    """A bad row past the first batch fails only when its batch is read."""
    path = write(tmp_path / "late.csv", "a,b\n1,2\n3,4\n5\n")
    batches = iter_batches(path, batch_rows=2)
    assert next(batches).table.num_rows == 2
    with raises(f"{path}:4: expected 2 fields, got 1"):
        next(batches)


@pytest.mark.parametrize(("name", "data", "message"), [
    ("wide.csv", "a,b\n1,2\n3,4,5\n", ":3: expected 2 fields, got 3"),
    ("narrow.tsv", "a\tb\n1\t2\n\n3\n", ":4: expected 2 fields, got 1"),
    # the quote opened on line 3 runs to the end: csv's strict mode says so
    ("open.csv", 'a,b\n1,2\n3,"x\n4,5\n', ":3: unexpected end of data"),
    ("open.tsv", 'a\tb\n1\t"x\n', ":2: unexpected end of data"),
    ("latin1.csv", b"a,b\n1,caf\xe9\n", ":2: not UTF-8 text (byte 9: 0xe9)"),
    ("empty.csv", "", ": empty, expected a header line"),
    ("blank.tsv", "\n\r\n", ": empty, expected a header line"),
    ("twice.csv", "\n\na,b,a\n1,2,3\n", ":3: column 'a' twice in the header"),
])
def test_bad_delimited_files(tmp_path: Path, name: str, data: str | bytes, message: str) -> None:
    path = write(tmp_path / name, data)
    with raises(f"{path}{message}"):
        rows(path)


def test_header_only_has_columns_and_no_rows(tmp_path: Path) -> None:
    path = write(tmp_path / "head.csv", "text,label")
    assert table_columns(path) == ["text", "label"]
    assert rows(path) == ([], [])


# -- JSON Lines ----------------------------------------------------------------------------------


def test_jsonl_quirks_and_values(tmp_path: Path) -> None:
    path = write(tmp_path / "rows.jsonl", BOM + (
        b'{"text": "caf\xc3\xa9", "n": 3, "x": 1.5, "ok": true, "tags": ["a", "b"]}\r\n'
        b'\r\n'
        b'{"text": "two", "n": null, "x": 2, "ok": false, "tags": null, "extra": {"k": 1}}\n'
        b'\n'
        b'{"text": "three", "tags": ["c", 4]}'))
    table_rows, where = rows(path)
    assert table_rows == [
        {"text": "café", "n": "3", "x": "1.5", "ok": "true", "tags": ["a", "b"], "extra": None},
        {"text": "two", "n": None, "x": "2", "ok": "false", "tags": None, "extra": {"k": 1}},
        {"text": "three", "n": None, "x": None, "ok": None, "tags": ["c", "4"], "extra": None},
    ]
    assert where == [f"{path}:1", f"{path}:3", f"{path}:5"]
    assert table_columns(path) == ["text", "n", "x", "ok", "tags", "extra"]


@pytest.mark.parametrize(("data", "where", "type_"), [
    ('{"review": "fine"}\n{"review": {"title": "t"}}\n', 2, "struct<title: string>"),
    ('{"review": {"a": 1}}\n{"review": {"a": "x"}}\n', 1, "struct<object: string>"),  # clash
])
def test_a_jsonl_object_is_no_text(tmp_path: Path, data: str, where: int, type_: str) -> None:
    """A review given as an object was fed to the model as its JSON text."""
    path = write(tmp_path / "rows.jsonl", data)
    (batch,) = iter_batches(path)
    with raises(f"{path}:{where}: column 'review' (text) holds {type_}, not text: give its text "
                "in the column"):
        select_fields(batch, "classification", {"text": "review"})


def test_jsonl_key_of_lists_and_texts_is_texts(tmp_path: Path) -> None:
    path = write(tmp_path / "mixed.jsonl", '{"c": ["a"]}\n{"c": "b"}\n')
    assert rows(path)[0] == [{"c": '["a"]'}, {"c": "b"}]


@pytest.mark.parametrize(("data", "message"), [
    ('{"a": 1}\n{"a": \n', ":2: not a JSON object: Expecting value"),
    ('{"a": 1}\n\n[1, 2]\n', ":3: not a JSON object: an array"),
    ('"text"\n', ":1: not a JSON object: a string"),
    (b'{"a": "\xff"}\n', ":1: not UTF-8 text (byte 7: 0xff)"),
])
def test_bad_jsonl(tmp_path: Path, data: str | bytes, message: str) -> None:
    path = write(tmp_path / "bad.jsonl", data)
    with raises(f"{path}{message}"):
        rows(path)


def test_empty_jsonl_has_no_columns(tmp_path: Path) -> None:
    path = write(tmp_path / "empty.ndjson", "\n")
    assert rows(path) == ([], [])
    with raises(f"{path}: empty, expected a JSON object a line"):
        table_columns(path)


# -- Parquet -------------------------------------------------------------------------------------


def test_parquet_as_stored(tmp_path: Path) -> None:
    path = tmp_path / "rows.parquet"
    pq.write_table(pa.table({"text": ["a", "b", "c"], "stars": [1, 5, None],
                             "choices": [["x", "y"], ["z", "w"], None]}), path,
                   row_group_size=2)
    batches = list(iter_batches(path, batch_rows=2))
    assert [b.table.num_rows for b in batches] == [2, 1]
    assert batches[0].table.schema.field("stars").type == pa.int64()
    table_rows, where = rows(path)
    assert table_rows == [{"text": "a", "stars": 1, "choices": ["x", "y"]},
                          {"text": "b", "stars": 5, "choices": ["z", "w"]},
                          {"text": "c", "stars": None, "choices": None}]
    assert where == [f"{path}: row 1", f"{path}: row 2", f"{path}: row 3"]
    assert table_columns(path) == ["text", "stars", "choices"]


def test_not_a_parquet_file(tmp_path: Path) -> None:
    path = write(tmp_path / "fake.pq", "text,label\n")
    with pytest.raises(DataFormatError, match=f"^{re.escape(str(path))}: not a Parquet file "):
        rows(path)


# -- formats -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "fmt"), [
    ("a.csv", "csv"), ("a.CSV", "csv"), ("a.tsv", "tsv"), ("a.tab", "tsv"), ("a.jsonl", "jsonl"),
    ("a.ndjson", "jsonl"), ("a.parquet", "parquet"), ("a.pq", "parquet"),
])
def test_format_from_extension(name: str, fmt: str) -> None:
    assert table_format(Path(name)) == fmt


def test_format_named_or_refused() -> None:
    assert table_format(Path("data.txt"), "tsv") == "tsv"
    with raises("data.txt: cannot tell its format from the extension '.txt': name it (csv, tsv, "
                "jsonl, parquet: a task's table.format, or `gpt1 task add --format`), or name "
                "the file .csv, .tsv, .tab, .jsonl, .ndjson, .parquet, .pq"):
        table_format(Path("data.txt"))
    # where the reader's own option names it (gpt1 predict's --input-format), or nothing does
    with raises("data.txt: cannot tell its format from the extension '.txt': name it (csv, tsv, "
                "jsonl, parquet: --input-format), or name the file .csv, .tsv, .tab, .jsonl, "
                ".ndjson, .parquet, .pq"):
        table_format(Path("data.txt"), how="--input-format")
    with raises("data.txt: cannot tell its format from the extension '.txt': name the file "
                ".csv, .tsv, .tab, .jsonl, .ndjson, .parquet, .pq"):
        table_format(Path("data.txt"), how=None)
    with raises("data.txt: format 'xlsx' is not one of csv, tsv, jsonl, parquet"):
        table_format(Path("data.txt"), "xlsx")


def test_a_named_format_overrides_the_extension(tmp_path: Path) -> None:
    path = write(tmp_path / "export.txt", "a\tb\n1\t2\n")
    assert rows(path, "tsv")[0] == [{"a": "1", "b": "2"}]


# -- a family's fields ---------------------------------------------------------------------------


def _batch(path: Path, **columns: list[object]) -> TableBatch:
    n = len(next(iter(columns.values())))
    return TableBatch(pa.table(columns), [f"{path}:{line}" for line in range(2, n + 2)], path)


def test_select_fields_by_column_name_or_the_fields_own() -> None:
    batch = _batch(Path("t.csv"), review=["good", "bad"], premise=["p", "q"], hypothesis=["h", "i"])
    assert select_fields(batch, "classification", {"text": "review"}) == {
        "text": ["good", "bad"]}
    assert select_fields(batch, "entailment", {}) == {"premise": ["p", "q"],
                                                      "hypothesis": ["h", "i"]}


def test_select_choices_from_columns_or_a_list() -> None:
    batch = _batch(Path("t.jsonl"), story=["s1", "s2"], e1=["a", "b"], e2=["c", "d"],
                   endings=[["x", "y", "z"], ["u", "v", "w"]], q=["why?", None])
    assert select_fields(batch, "multiple_choice",
                         {"context": "story", "choices": ["e1", "e2"]}) == {
        "context": ["s1", "s2"], "question": ["", ""], "choices": [["a", "c"], ["b", "d"]]}
    assert select_fields(batch, "multiple_choice",
                         {"context": "story", "question": "q", "choices": "endings"}) == {
        "context": ["s1", "s2"], "question": ["why?", ""],
        "choices": [["x", "y", "z"], ["u", "v", "w"]]}


@pytest.mark.parametrize(("columns", "family", "mapping", "message"), [
    ({"a": ["x"], "b": ["y"]}, "classification", {"text": "review"},
     "t.csv: no column 'review' for text (the file's columns: a, b)"),
    ({"review": ["fine", " "]}, "classification", {"text": "review"},
     "t.csv:3: column 'review' (text) is empty"),
    ({"review": [None, "x"]}, "classification", {"text": "review"},
     "t.csv:2: column 'review' (text) is empty"),
    ({"text_a": ["x"], "b": ["y"]}, "similarity", {},
     "t.csv: no column 'text_b' for text_b (the file's columns: text_a, b)"),
    ({"context": ["c"], "e": ["one"]}, "multiple_choice", {"choices": "e"},
     "t.csv:2: column 'e' (choices) holds a string, not a list of texts: name one column per "
     "choice (choices: [a, b]), or give a list in each row"),
    ({"context": ["c", "d"], "e": [["a", "b"], ["a"]]}, "multiple_choice", {"choices": "e"},
     "t.csv:3: column 'e' (choices): expected a list of at least 2 texts, none empty, got ['a']"),
    ({"context": ["c"], "e1": ["a"], "e2": [""]}, "multiple_choice", {"choices": ["e1", "e2"]},
     "t.csv:2: column 'e2' (choices) is empty"),
    # a list, object or a list of objects where text is read: fed as its repr before
    ({"review": [None, ["a", "b"]]}, "classification", {"text": "review"},
     "t.csv:3: column 'review' (text) holds list<item: string>, not text: give its text in the "
     "column"),
    ({"review": [{"title": "t", "body": "b"}]}, "classification", {"text": "review"},
     "t.csv:2: column 'review' (text) holds struct<title: string, body: string>, not text: give "
     "its text in the column"),
    ({"context": ["c"], "e": [[{"a": 1}, {"a": 2}]]}, "multiple_choice", {"choices": "e"},
     "t.csv:2: column 'e' (choices) holds a list<item: struct<a: int64>>, not a list of texts: "
     "name one column per choice (choices: [a, b]), or give a list in each row"),
])
def test_select_fields_errors(columns: dict[str, list[object]], family: Family,
                              mapping: dict[str, str | list[str]], message: str) -> None:
    with raises(message):
        select_fields(_batch(Path("t.csv"), **columns), family, mapping)


# -- the `table` reader --------------------------------------------------------------------------


def table_task(family: str, files: dict[str, str], table: dict[str, object],
               labels: list[str] | None = None, metrics: tuple[str, ...] = ("accuracy",),
               **more: object) -> TaskParams:
    return TaskParams.model_validate({"title": "Mine", "family": family, "reader": "table",
                                      "files": files, "labels": labels, "metrics": list(metrics),
                                      "table": table, **more})


def read(task: TaskParams, root: Path, split: str) -> list[dict[str, object]]:
    return read_task_split(task, root, split).to_pylist()


def test_classification_with_label_values(tmp_path: Path) -> None:
    write(tmp_path / "r/train.csv", "stars,review\n1,awful\n5,\"great,\nreally\"\n2,poor\n")
    write(tmp_path / "r/test.csv", "review\nunseen\n")
    task = table_task("classification", {"train": "r/train.csv", "dev": "r/dev.csv",
                                         "test": "r/test.csv"},
                      {"columns": {"text": "review", "label": "stars"},
                       "label_values": {1: "negative", 2: "negative", 5: "positive"}},
                      labels=["negative", "positive"])
    assert read(task, tmp_path, "train") == [
        {"idx": 0, "text": "awful", "label": 0}, {"idx": 1, "text": "great,\nreally", "label": 1},
        {"idx": 2, "text": "poor", "label": 0}]
    assert read(task, tmp_path, "test") == [{"idx": 0, "text": "unseen", "label": None}]
    write(tmp_path / "r/train.csv", "stars,review\n1,awful\n3,so-so\n")
    with raises(f"{tmp_path}/r/train.csv:3: label '3' is not one of ['1', '2', '5']"):
        read(task, tmp_path, "train")


def test_labels_are_the_files_values_without_label_values(tmp_path: Path) -> None:
    write(tmp_path / "t.csv", "text,label\nyes,pos\nno,neg\nhm,neutral\n")
    task = table_task("classification", {"train": "t.csv", "dev": "d.csv"}, {},
                      labels=["neg", "pos"])
    with raises(f"{tmp_path}/t.csv:4: label 'neutral' is not one of ['neg', 'pos']"):
        read(task, tmp_path, "train")


def test_a_labelled_split_needs_its_label_column(tmp_path: Path) -> None:
    write(tmp_path / "t.csv", "text,stars\nyes,1\nno,2\n")
    write(tmp_path / "d.csv", "text\nno\n")
    write(tmp_path / "e.csv", "text,stars\nno,\n")
    task = table_task("classification", {"train": "t.csv", "dev": "d.csv", "test_x": "e.csv"},
                      {"columns": {"label": "stars"}}, labels=["1", "2"])
    with raises(f"{tmp_path}/d.csv: no column 'stars' for label (the file's columns: text)"):
        read(task, tmp_path, "dev")
    assert read(task, tmp_path, "test_x") == [{"idx": 0, "text": "no", "label": None}]
    write(tmp_path / "d.csv", "text,stars\nno,\n")
    with raises(f"{tmp_path}/d.csv:2: column 'stars' (label) is empty"):
        read(task, tmp_path, "dev")


ENTAILMENT = ("id\tset\tsentence_A\tsentence_B\tentailment_judgment\n"
              "1\tTRAIN\tA man plays.\tA person plays.\tENTAILMENT\n"
              "2\tTRIAL\tA dog runs.\tA cat sleeps.\tNEUTRAL\n"
              "3\tTRAIN\tKids laugh.\tNobody laughs.\tCONTRADICTION\n"
              "4\tTEST\tIt rains.\t\"It is \"\"wet\"\".\"\tENTAILMENT\n")


def entailment_task(split_values: dict[str, str]) -> TaskParams:
    return table_task("entailment", {"train": "sick.tsv", "dev": "sick.tsv", "test": "sick.tsv"},
                      {"columns": {"premise": "sentence_A", "hypothesis": "sentence_B",
                                   "label": "entailment_judgment"},
                       "split_column": "set", "split_values": split_values},
                      labels=["ENTAILMENT", "NEUTRAL", "CONTRADICTION"])


def test_entailment_splits_from_one_file(tmp_path: Path) -> None:
    write(tmp_path / "sick.tsv", ENTAILMENT)
    task = entailment_task({"train": "TRAIN", "dev": "TRIAL", "test": "TEST"})
    assert read(task, tmp_path, "train") == [
        {"idx": 0, "premise": "A man plays.", "hypothesis": "A person plays.", "label": 0},
        {"idx": 1, "premise": "Kids laugh.", "hypothesis": "Nobody laughs.", "label": 2}]
    assert read(task, tmp_path, "dev") == [
        {"idx": 0, "premise": "A dog runs.", "hypothesis": "A cat sleeps.", "label": 1}]
    assert read(task, tmp_path, "test") == [
        {"idx": 0, "premise": "It rains.", "hypothesis": 'It is "wet".', "label": 0}]


def test_a_row_of_no_declared_split_is_named(tmp_path: Path) -> None:
    write(tmp_path / "sick.tsv", ENTAILMENT)
    task = entailment_task({"train": "TRAIN", "dev": "TRIAL"})  # test: its own name, `test`
    with raises(f"{tmp_path}/sick.tsv:5: set 'TEST' is not one of ['TRAIN', 'TRIAL', 'test'], "
                "the values of the task's splits (table.split_values)"):
        read(task, tmp_path, "train")


def test_a_split_without_rows(tmp_path: Path) -> None:
    write(tmp_path / "sick.tsv", ENTAILMENT.replace("\tTRIAL\t", "\tTRAIN\t"))
    task = entailment_task({"train": "TRAIN", "dev": "TRIAL", "test": "TEST"})
    with raises(f"{tmp_path}/sick.tsv: no rows to read into Mine's dev split"):
        read(task, tmp_path, "dev")


def test_similarity_regression_with_scores(tmp_path: Path) -> None:
    write(tmp_path / "sts.jsonl", '{"a": "one", "b": "two", "sim": 4.5}\n'
                                  '{"a": "three", "b": "four", "sim": "0"}\n')
    task = table_task("similarity", {"train": "sts.jsonl", "dev": "sts_dev.jsonl"},
                      {"columns": {"text_a": "a", "text_b": "b", "label": "sim"},
                       "scores": [0, 5]}, metrics=("pearson", "spearman"))
    assert task.regression
    assert read(task, tmp_path, "train") == [
        {"idx": 0, "text_a": "one", "text_b": "two", "label": 4.5},
        {"idx": 1, "text_a": "three", "text_b": "four", "label": 0.0}]
    write(tmp_path / "sts.jsonl", '{"a": "one", "b": "two", "sim": 5.5}\n')
    with raises(f"{tmp_path}/sts.jsonl:1: score '5.5' is not a number from 0 to 5"):
        read(task, tmp_path, "train")


def test_similarity_with_labels(tmp_path: Path) -> None:
    for name in ("p.parquet", "p_dev.parquet"):
        pq.write_table(pa.table({"text_a": ["x", "y"], "text_b": ["z", "w"], "label": [1, 0]}),
                       tmp_path / name)
    task = table_task("similarity", {"train": "p.parquet", "dev": "p_dev.parquet"}, {},
                      labels=["0", "1"], metrics=("f1", "accuracy"))
    assert read(task, tmp_path, "dev") == [{"idx": 0, "text_a": "x", "text_b": "z", "label": 1},
                                           {"idx": 1, "text_a": "y", "text_b": "w", "label": 0}]


STORIES = ("story,ending1,ending2,answer\n"
           "He got up.,He slept.,He ate.,ending2\n"
           "It rained.,She got wet.,She flew.,0\n")


def test_multiple_choice_from_several_columns(tmp_path: Path) -> None:
    write(tmp_path / "s.csv", STORIES)
    task = table_task("multiple_choice", {"train": "s.csv", "dev": "s_dev.csv"},
                      {"columns": {"context": "story", "choices": ["ending1", "ending2"],
                                   "label": "answer"}})
    assert read(task, tmp_path, "train") == [
        {"idx": 0, "context": "He got up.", "question": "", "choices": ["He slept.", "He ate."],
         "label": 1},
        {"idx": 1, "context": "It rained.", "question": "",
         "choices": ["She got wet.", "She flew."], "label": 0}]
    write(tmp_path / "s.csv", STORIES.replace(",0\n", ",2\n"))
    with raises(f"{tmp_path}/s.csv:3: label '2' is not a choice: give its index from 0 to 1 or "
                "its column's name (ending1, ending2)"):
        read(task, tmp_path, "train")


def test_multiple_choice_from_a_list_column(tmp_path: Path) -> None:
    write(tmp_path / "race.jsonl",
          '{"article": "A text.", "q": "Why?", "options": ["a", "b", "c"], "answer": "C"}\n'
          '{"article": "B text.", "q": "How?", "options": ["d", "e", "f"], "answer": "A"}\n')
    task = table_task("multiple_choice", {"train": "race.jsonl", "dev": "race_dev.jsonl"},
                      {"columns": {"context": "article", "question": "q", "choices": "options",
                                   "label": "answer"},
                       "label_values": {"A": "0", "B": "1", "C": "2"}})
    assert read(task, tmp_path, "train") == [
        {"idx": 0, "context": "A text.", "question": "Why?", "choices": ["a", "b", "c"],
         "label": 2},
        {"idx": 1, "context": "B text.", "question": "How?", "choices": ["d", "e", "f"],
         "label": 0}]
    write(tmp_path / "race.jsonl",
          '{"article": "A text.", "q": "Why?", "options": ["a", "b", "c"], "answer": "C"}\n'
          '{"article": "B text.", "q": "How?", "options": ["d", "e"], "answer": "A"}\n')
    with raises(f"{tmp_path}/race.jsonl:2: 2 choices, where {tmp_path}/race.jsonl:1 has 3: "
                "every example needs as many"):
        read(task, tmp_path, "train")
    write(tmp_path / "race.jsonl",
          '{"article": "A text.", "q": "Why?", "options": ["a", "b", "c"], "answer": "E"}\n')
    with raises(f"{tmp_path}/race.jsonl:1: label 'E' is not one of ['A', 'B', 'C']"):
        read(task, tmp_path, "train")


def test_a_predict_file_is_not_needed_to_run(tmp_path: Path) -> None:
    write(tmp_path / "t.csv", "text,label\nyes,pos\nno,neg\n")
    write(tmp_path / "d.csv", "text,label\nyes,pos\n")
    task = table_task("classification", {"train": "t.csv", "dev": "d.csv", "predict": "new.csv"},
                      {}, labels=["neg", "pos"])
    assert task.eval_splits == ["dev"] and task.data_splits == ["train", "dev"]
    assert missing_files(task, tmp_path) == []
    write(tmp_path / "new.csv", "text\nmaybe\n")
    assert read(task, tmp_path, "predict") == [{"idx": 0, "text": "maybe", "label": None}]
