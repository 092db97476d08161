"""`gpt1 predict` (gpt1.jobs.predict) over a fine-tuned model folder that stands alone
(gpt1.downstream.standalone): each family's prediction equals its model run on each example
alone, laid out as the paper's input transformations restated here; every input format; the
stage `predict@<task>` when there is nothing to predict; bad input as one line; `--precision
bf16` only where the CPU computes bf16 natively, and there labelling as fp32 does."""

from __future__ import annotations

import csv
import errno
import io
import json
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
import torch
from typer.testing import CliRunner

import gpt1.training.device
from gpt1.cli import app
from gpt1.config import Params, TableParams, TaskParams
from gpt1.corpus.text import TextCleaner
from gpt1.corpus.tokenizer import GPT1Tokenizer, train_bpe
from gpt1.downstream.families import family_of
from gpt1.downstream.standalone import load_finetuned, save_finetuned, task_card
from gpt1.errors import MissingInputError, is_input_error
from gpt1.jobs.predict import predict_file
from gpt1.model.heads import TaskModel
from gpt1.model.transformer import GPT1, GPT1Config
from gpt1.records import write_not_run_table

REVIEWS = ["a gripping film , i loved it", "dull and far too long", "the cast is great",
           "i would not watch it again", "a quiet , lovely story"]


@pytest.fixture(scope="module")
def tokenizer_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    texts = [*REVIEWS, "the story ends well", "she left the house"] * 10
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    GPT1Tokenizer(train_bpe(texts, vocab_size=300, min_frequency=1)).backend.save(str(path))
    return path


def spec(family: str, labels: list[str] | None, columns: dict[str, object] | None = None,
         scores: list[float] | None = None) -> TaskParams:
    metrics = (["pearson"] if family == "similarity" and labels is None else ["accuracy"])
    table = (TableParams(columns=columns, scores=scores) if columns is not None or scores
             else None)
    return TaskParams(title="Mine", family=family, reader="table" if table else "glue_sst2",
                      table=table, labels=labels, metrics=metrics,
                      files={"train": "mine/train.csv", "dev": "mine/dev.csv"})


def make_model(folder: Path, task: TaskParams, tokenizer_file: Path, seed: int) -> Path:
    """A fine-tuned model folder of a tiny random trunk and head."""
    torch.manual_seed(seed)
    tok = GPT1Tokenizer.load(tokenizer_file)
    trunk = GPT1(GPT1Config(vocab_size=tok.vocab_size, n_ctx=32, n_embd=32, n_layer=2,
                            n_head=2))
    model = TaskModel(trunk, family_of(task), family_of(task).n_outputs(task), 0.1, seed)
    with torch.no_grad():
        model.head.bias.normal_()  # a head whose bias matters, as a fine-tuned one's
    folder.mkdir(parents=True)
    save_finetuned(folder, model, task_card("mine", task, 32, seed), tokenizer_file)
    return folder


def ids(tok: GPT1Tokenizer, text: str) -> list[int]:
    return tok.encode(TextCleaner()(text))


def outputs_one_by_one(folder: Path, sequences: list[list[int]]) -> list[torch.Tensor]:
    """The model's head outputs for each sequence alone: no batch, no padding."""
    loaded = load_finetuned(folder)
    with torch.no_grad():
        return [loaded.model(torch.tensor([s]), torch.tensor([len(s)]), 1)[0][0]
                for s in sequences]


def write_csv(path: Path, text: str) -> Path:
    path.write_bytes(text.encode("utf-8"))
    return path


def test_classification_predictions_are_the_model_on_each_example_alone(
        tmp_path: Path, tokenizer_file: Path) -> None:
    folder = make_model(tmp_path / "model", spec("classification", ["neg", "pos"],
                                                 {"text": "review"}), tokenizer_file, 1)
    # a BOM, CRLF, a quoted review over two lines with doubled quotes, no final newline
    source = write_csv(tmp_path / "new.csv", "\ufeffid,review\r\n1,\"a gripping film , i loved it\""
                       "\r\n2,\"dull and \"\"far\"\"\ntoo long\"\n3,the cast is great")
    out = tmp_path / "scored.parquet"
    assert predict_file(folder, source, out) == 3
    got = pq.read_table(out).to_pylist()
    assert [row["id"] for row in got] == ["1", "2", "3"]
    assert got[1]["review"] == 'dull and "far"\ntoo long'
    tok = GPT1Tokenizer.load(tokenizer_file)
    texts = ["a gripping film , i loved it", 'dull and "far"\ntoo long', "the cast is great"]
    # the paper's classification transform: <start> text <extract>
    expected = outputs_one_by_one(folder, [[tok.start_id, *ids(tok, t), tok.classify_id]
                                           for t in texts])
    for row, logits in zip(got, expected, strict=True):
        probs = torch.softmax(logits.double(), dim=0).numpy()
        assert row["prediction"] == ["neg", "pos"][int(probs.argmax())]
        assert row["probability_neg"] == pytest.approx(probs[0], abs=1e-5)
        assert row["probability_pos"] == pytest.approx(probs[1], abs=1e-5)


def test_the_rows_cut_to_fit_the_context_are_counted(tmp_path: Path, tokenizer_file: Path,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    """A review longer than the card's n_ctx (32) loses its end: the log says how many rows were
    cut and their median length uncut (<start>, the text, <classify>)."""
    folder = make_model(tmp_path / "model", spec("classification", ["neg", "pos"],
                                                 {"text": "review"}), tokenizer_file, 1)
    long = " ".join(REVIEWS * 3)
    source = write_csv(tmp_path / "new.csv", f'review\nthe cast is great\n"{long}"\n"{long} ."\n')
    with caplog.at_level(logging.INFO, logger="gpt1.jobs.predict"):
        predict_file(folder, source, tmp_path / "scored.csv")
    tok = GPT1Tokenizer.load(tokenizer_file)
    uncut = sorted(2 + len(ids(tok, text)) for text in (long, f"{long} ."))
    assert uncut[0] > 32
    assert (f"3 rows predicted; 2 longer than the model's context (n_ctx 32 tokens), cut to fit "
            f"(median {sum(uncut) / 2:.0f} tokens)") in caplog.text


def test_similarity_score_adds_both_orders(tmp_path: Path, tokenizer_file: Path) -> None:
    folder = make_model(tmp_path / "model", spec("similarity", None, {"text_a": "a",
                                                                      "text_b": "b"}, [0, 5]),
                        tokenizer_file, 2)
    source = tmp_path / "pairs.jsonl"
    source.write_text('{"a": "the story ends well", "b": "she left the house"}\n\n'
                      '{"a": "dull and far too long", "b": "the cast is great"}\n')
    out = tmp_path / "scored.jsonl"
    predict_file(folder, source, out)
    got = [json.loads(line) for line in out.read_text().splitlines()]
    tok = GPT1Tokenizer.load(tokenizer_file)
    loaded = load_finetuned(folder)
    for row in got:
        a, b = ids(tok, row["a"]), ids(tok, row["b"])
        both = [[tok.start_id, *a, tok.delim_id, *b, tok.classify_id],
                [tok.start_id, *b, tok.delim_id, *a, tok.classify_id]]
        with torch.no_grad():  # the paper: both orders' final states added, then the head
            states = [loaded.model.trunk(torch.tensor([s]))[0, -1] for s in both]
            score = loaded.model.head(states[0] + states[1])[0]
        assert row["prediction"] == pytest.approx(float(score), abs=1e-5)
        assert set(row) == {"a", "b", "prediction"}


def test_multiple_choice_picks_a_candidate(tmp_path: Path, tokenizer_file: Path) -> None:
    folder = make_model(tmp_path / "model",
                        spec("multiple_choice", None, {"context": "story",
                                                       "choices": ["end1", "end2"]}),
                        tokenizer_file, 3)
    source = write_csv(tmp_path / "stories.tsv", "story\tend1\tend2\n"
                       "she left the house\tthe story ends well\ta quiet , lovely story\n"
                       "the cast is great\ti loved it\tdull\n")
    out = tmp_path / "scored.csv"
    predict_file(folder, source, out)
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    tok = GPT1Tokenizer.load(tokenizer_file)
    for row in rows:
        context = ids(tok, row["story"])
        endings = [row["end1"], row["end2"]]
        scores = outputs_one_by_one(folder, [[tok.start_id, *context, tok.delim_id,
                                              *ids(tok, e), tok.classify_id] for e in endings])
        chosen = int(np.argmax([float(s[0]) for s in scores]))
        assert int(row["prediction"]) == chosen
        assert row["prediction_text"] == endings[chosen]


def test_batches_of_any_size_predict_the_same(tmp_path: Path, tokenizer_file: Path) -> None:
    folder = make_model(tmp_path / "model", spec("classification", ["a", "b", "c"]),
                        tokenizer_file, 4)
    source = tmp_path / "in.parquet"
    pq.write_table(pa.table({"text": REVIEWS * 3, "n": list(range(15))}), source)
    whole, streamed = tmp_path / "whole.parquet", tmp_path / "streamed.parquet"
    predict_file(folder, source, whole)
    predict_file(folder, source, streamed, batch_rows=2, batch_size=3)
    a, b = pq.read_table(whole), pq.read_table(streamed)
    assert a.column("prediction").to_pylist() == b.column("prediction").to_pylist()
    assert a.column("n").to_pylist() == list(range(15))
    np.testing.assert_allclose(a.column("probability_a").to_numpy(),
                               b.column("probability_a").to_numpy(), atol=1e-5)


def cli(*args: str) -> object:
    return CliRunner().invoke(app, ["predict", *args])


@pytest.mark.parametrize("case", ["missing column", "not a fine-tuned model", "clash",
                                  "bad row", "bad device"])
def test_bad_input_is_one_line_and_keeps_the_old_output(tmp_path: Path, tokenizer_file: Path,
                                                        case: str) -> None:
    folder = make_model(tmp_path / "model", spec("classification", ["neg", "pos"],
                                                 {"text": "review"}), tokenizer_file, 5)
    source = write_csv(tmp_path / "in.csv", "id,review\n1,fine\n")
    model, extra = str(folder), []
    expected = {"missing column": f"{tmp_path / 'in.csv'}: no column 'review'",
                "not a fine-tuned model": f"{tmp_path / 'pretrained' / 'task.json'}: not found",
                "clash": "columns ['prediction'] would be overwritten",
                "bad row": f"{tmp_path / 'in.csv'}:3: expected 2 fields, got 3",
                "bad device": "--device 'gpu'"}[case]
    if case == "missing column":
        write_csv(source, "id,text_of_review\n1,fine\n")
    elif case == "not a fine-tuned model":
        (tmp_path / "pretrained").mkdir()
        for name in ("config.json", "model.safetensors", "tokenizer.json"):
            (tmp_path / "pretrained" / name).write_bytes((folder / name).read_bytes())
        model = str(tmp_path / "pretrained")
    elif case == "clash":
        write_csv(source, "review,prediction\nfine,x\n")
    elif case == "bad row":
        write_csv(source, "id,review\n1,fine\n2,too,many\n")
    else:
        extra = ["--device", "gpu"]
    out = tmp_path / "out.csv"
    out.write_text("kept\n")
    result = cli("--model", model, "--input", str(source), "--out", str(out), "--force", *extra)
    assert result.exit_code == 2, result.output
    assert result.output.count("\n") == 1 and expected in result.output
    assert out.read_text() == "kept\n"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


# `gpt1 predict` in a child process that, once it has written its first batch of predictions
# into the output's temporary file, says so and waits for a signal: interrupted mid-scoring
# every time, not at whatever point a timer happens to fall. SIGINT raises KeyboardInterrupt as
# at an interactive terminal, even where the test runs with SIGINT ignored (in the background).
STOPS_MIDWAY = """
import signal, sys
import gpt1.jobs.predict as job
from gpt1.cli import main
write = job._Writer.write
def write_then_wait(self, table):
    write(self, table)
    print("written", flush=True)
    signal.pause()
job._Writer.write = write_then_wait
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.argv[0] = "gpt1"
main()
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL],
                         ids=lambda signum: signum.name)
def test_an_interrupted_predict_leaves_the_old_output_and_no_look_alike(
        tmp_path: Path, tokenizer_file: Path, signum: int) -> None:
    """Ctrl-C and `kill` mid-scoring end with 128 + the signal and nothing beside the output
    (SIGTERM did, before, leave the temporary file); `kill -9` leaves only the temporary, a
    hidden `.out.parquet.<pid>.<random>.tmp` that the next predict to that output removes. The
    output is never replaced by a part of the rows."""
    folder = make_model(tmp_path / "model", spec("classification", ["neg", "pos"],
                                                 {"text": "review"}), tokenizer_file, 7)
    scored = tmp_path / "scored"
    scored.mkdir()
    source = write_csv(scored / "in.csv", "id,review\n1,fine\n2,dull\n")
    out = write_csv(scored / "out.parquet", "the previous predictions\n")
    args = ["predict", "--model", str(folder), "--input", str(source), "--out", str(out),
            "--force"]
    proc = subprocess.Popen([sys.executable, "-c", STOPS_MIDWAY, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "written\n"
    temporary = [p.name for p in scored.iterdir() if p.name.startswith(".out.parquet.")]
    assert len(temporary) == 1
    assert temporary[0].startswith(f".out.parquet.{proc.pid}.") and temporary[0].endswith(".tmp")
    proc.send_signal(signum)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == (-signum if signum == signal.SIGKILL else 128 + signum), stderr
    assert "Traceback" not in stderr
    assert out.read_text() == "the previous predictions\n"
    left = sorted(p.name for p in scored.iterdir())
    assert left == sorted(["in.csv", "out.parquet", *temporary[:signum == signal.SIGKILL]])
    result = cli(*args[1:])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in scored.iterdir()) == ["in.csv", "out.parquet"]
    assert pq.read_table(out).column("id").to_pylist() == ["1", "2"]


@pytest.mark.parametrize("fmt", ["parquet", "csv", "jsonl"])
def test_a_full_disk_is_one_line_and_keeps_the_old_output(
        tmp_path: Path, tokenizer_file: Path, monkeypatch: pytest.MonkeyPatch, fmt: str) -> None:
    """The disk fills once the first batch is written (a write raises ENOSPC, naming no file,
    as a full disk does): one line naming the output and saying to free space, exit 2, the
    output --force was replacing as it was, no temporary left."""
    import gpt1.jobs.predict as job

    folder = make_model(tmp_path / "model", spec("classification", ["neg", "pos"],
                                                 {"text": "review"}), tokenizer_file, 8)
    source = write_csv(tmp_path / "in.csv", "id,review\n1,fine\n2,dull\n")
    out = write_csv(tmp_path / f"out.{fmt}", "the previous predictions\n")
    write = job._Writer.write

    def write_then_fill(self: job._Writer, table: pa.Table) -> None:
        write(self, table)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(job._Writer, "write", write_then_fill)
    result = cli("--model", str(folder), "--input", str(source), "--out", str(out), "--force")
    assert (result.exit_code, result.output) == (
        2, f"error: no space left on device writing {out}: free some space and run it again\n")
    assert out.read_text() == "the previous predictions\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv", "model", f"out.{fmt}"]


def test_an_existing_out_needs_force_a_folder_or_the_input_never(
        tmp_path: Path, tokenizer_file: Path) -> None:
    folder = make_model(tmp_path / "model", spec("classification", ["neg", "pos"],
                                                 {"text": "review"}), tokenizer_file, 6)
    source = write_csv(tmp_path / "in.csv", "id,review\n1,fine\n")
    out = write_csv(tmp_path / "out.csv", "mine\n")
    args = ("--model", str(folder), "--input", str(source), "--out")
    result = cli(*args, str(out))
    assert (result.exit_code, result.output) == (
        2, f"error: --out {out}: exists; refusing to replace it (--force replaces it)\n")
    assert out.read_text() == "mine\n"
    result = cli(*args, str(out), "--force")
    assert result.exit_code == 0, result.output
    with out.open(newline="") as fh:
        assert next(csv.reader(fh))[:3] == ["id", "review", "prediction"]
    # a folder where a file is named: refused before any row is scored, the folder named
    (tmp_path / "d.csv").mkdir()
    result = cli(*args, str(tmp_path / "d.csv"), "--force")
    assert (result.exit_code, result.output) == (
        2, f"error: --out {tmp_path / 'd.csv'}: is a folder; name a file to write\n")
    # the input itself, or the model folder, even with --force
    for own, option in ((source, source), (folder / "scored.csv", folder)):
        result = cli(*args, str(own), "--force")
        where = "is" if own == source else "inside"
        assert (result.exit_code, result.output) == (
            2, f"error: --out {own}: {where} the input {option}; refusing to write there, even "
               "with --force: write elsewhere\n")
    assert source.read_text() == "id,review\n1,fine\n"
    assert not (folder / "scored.csv").exists()


def test_an_input_that_is_a_symlink_loop_is_one_line(tmp_path: Path,
                                                      tokenizer_file: Path) -> None:
    """The destination check resolved the input and fell over the loop with a traceback."""
    folder = make_model(tmp_path / "model", spec("classification", ["neg", "pos"],
                                                 {"text": "review"}), tokenizer_file, 6)
    (tmp_path / "a.csv").symlink_to(tmp_path / "b.csv")
    (tmp_path / "b.csv").symlink_to(tmp_path / "a.csv")
    result = cli("--model", str(folder), "--input", str(tmp_path / "a.csv"), "--out",
                 str(tmp_path / "o.csv"))
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert "Too many levels of symbolic links" in result.output
    assert not (tmp_path / "o.csv").exists()


def test_a_format_the_extension_does_not_tell_names_the_option_there_is(
        tmp_path: Path, tokenizer_file: Path) -> None:
    """predict's message pointed to --format, an option it does not have."""
    folder = make_model(tmp_path / "model", spec("classification", ["neg", "pos"],
                                                 {"text": "review"}), tokenizer_file, 6)
    source = write_csv(tmp_path / "in.txt", "id,review\n1,fine\n")
    result = cli("--model", str(folder), "--input", str(source), "--out", str(tmp_path / "o.csv"))
    assert result.exit_code == 2 and "jsonl, parquet: --input-format), or name the file .csv" \
        in result.output, result.output
    result = cli("--model", str(folder), "--input", str(source), "--input-format", "csv",
                 "--out", str(tmp_path / "o.txt"))
    assert result.exit_code == 2 and f"{tmp_path / 'o.txt'}: cannot tell its format from the " \
        "extension '.txt': name the file .csv" in result.output, result.output


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_a_file_of_no_rows_makes_a_table_of_no_rows(tmp_path: Path, tokenizer_file: Path,
                                                    suffix: str) -> None:
    """A header and no rows wrote a 0-byte .parquet that pyarrow could not open."""
    folder = make_model(tmp_path / "model", spec("classification", ["neg", "pos"],
                                                 {"text": "review"}), tokenizer_file, 6)
    source = write_csv(tmp_path / "in.csv", "id,review\n")
    out = tmp_path / f"out{suffix}"
    result = cli("--model", str(folder), "--input", str(source), "--out", str(out))
    assert result.exit_code == 0, result.output
    table = pq.read_table(out) if suffix == ".parquet" else pacsv.read_csv(out)
    assert table.num_rows == 0
    assert table.column_names == ["id", "review", "prediction", "probability_neg",
                                  "probability_pos"]


def test_not_run_table_says_why(tmp_path: Path) -> None:
    path = tmp_path / "predictions" / "sst2.parquet"
    path.parent.mkdir()
    write_not_run_table(path, "no files.predict in its registry entry")
    table = pq.read_table(path)
    assert table.num_rows == 0
    assert table.schema.metadata[b"gpt1.not_run"] == b"no files.predict in its registry entry"


def test_the_stage_names_the_registry_for_an_unknown_task() -> None:
    from gpt1.config import ParamsError, load_params
    from tasks import predict as stage

    params = load_params(Path(__file__).resolve().parents[2] / "params.yaml")
    with pytest.raises(ParamsError, match=r"task 'nope' is not in the task registry \(tasks: "
                                          r"\['cola', 'mnli',"):
        stage.run(params, "nope")


# each family's entry (reader: table, a files.predict) and the file to score
STAGE_CASES = {
    "classification": ({"labels": ["neg", "pos"], "metrics": ["accuracy"],
                        "table": {"columns": {"text": "review"}}},
                       "review\nthe cast is great\n\"dull,\nfar too long\"\n"),
    "entailment": ({"labels": ["entails", "neutral", "contradicts"], "metrics": ["accuracy"],
                    "table": {"columns": {"premise": "a", "hypothesis": "b"}}},
                   "a,b\nshe left the house,she left\nthe story ends well,it rains\n"),
    "similarity": ({"labels": None, "metrics": ["pearson"],
                    "table": {"columns": {"text_a": "a", "text_b": "b"}, "scores": [0, 5]}},
                   "a,b\nshe left the house,she left\nthe story ends well,it rains\n"),
    "multiple_choice": ({"labels": None, "metrics": ["accuracy"],
                         "table": {"columns": {"context": "story", "choices": ["e1", "e2"]}}},
                        "story,e1,e2\nshe left the house,she came back,it rained\n"
                        "the cast is great,i loved it,dull\n"),
}


def stage_checkout(tmp_path: Path, tokenizer_file: Path, monkeypatch: pytest.MonkeyPatch,
                   family: str) -> Params:
    """A checkout in `tmp_path` (the working directory) whose one task, `mine`, of `family`
    (`STAGE_CASES`) is fine-tuned and names `mine/new.csv` as files.predict; its params."""
    from gpt1.config import parse_params, read_yaml

    entry, text = STAGE_CASES[family]
    entry = {"title": "Mine", "family": family, "reader": "table", **entry,
             "files": {"train": "mine/train.csv", "dev": "mine/dev.csv",
                       "predict": "mine/new.csv"}}
    raw = read_yaml((Path(__file__).resolve().parents[2] / "params.yaml").read_text())
    raw["ingest"]["root"] = str(tmp_path / "root")
    raw["tasks"], raw["finetune"]["tasks"] = {"mine": entry}, ["mine"]
    for analysis in ("ablation", "transfer", "zero_shot"):
        raw["analysis"][analysis]["tasks"] = {}
    params = parse_params(raw)
    (tmp_path / "root" / "mine").mkdir(parents=True)
    write_csv(tmp_path / "root" / "mine" / "new.csv", text)
    make_model(tmp_path / "artifacts" / "finetune" / "mine", params.tasks["mine"],
               tokenizer_file, 6)
    monkeypatch.chdir(tmp_path)
    return params


@pytest.mark.parametrize("family", sorted(STAGE_CASES))
def test_the_stage_scores_files_predict_for_every_family(
        tmp_path: Path, tokenizer_file: Path, monkeypatch: pytest.MonkeyPatch,
        family: str) -> None:
    from tasks import predict as stage

    entry, text = STAGE_CASES[family]
    params = stage_checkout(tmp_path, tokenizer_file, monkeypatch, family)
    stage.run(params, "mine")
    rows = pq.read_table(tmp_path / "predictions" / "mine.parquet").to_pylist()
    source = list(csv.DictReader(io.StringIO(text)))
    assert [{k: row[k] for k in source[0]} for row in rows] == source
    predicted = [row["prediction"] for row in rows]
    if family == "similarity":
        assert all(isinstance(p, float) for p in predicted)
    elif family == "multiple_choice":
        assert all(row["prediction_text"] == row[f"e{row['prediction'] + 1}"] for row in rows)
    else:
        assert set(predicted) <= set(entry["labels"])
        assert all(sum(row[f"probability_{label}"] for label in entry["labels"])
                   == pytest.approx(1.0) for row in rows)


def test_the_stage_names_the_key_of_a_files_predict_deleted(
        tmp_path: Path, tokenizer_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The file to score deleted: an error naming it and the key that names it (was `[Errno 2]
    No such file or directory: '...'`), which the stage runner reports in one line with exit
    code 2; the predictions of the last run are left as they were (`dvc repro` deletes them
    before it runs the stage: no stale table is left to pass for the new file's)."""
    from tasks import predict as stage

    params = stage_checkout(tmp_path, tokenizer_file, monkeypatch, "classification")
    stage.run(params, "mine")
    before = (tmp_path / "predictions" / "mine.parquet").read_bytes()
    (tmp_path / "root" / "mine" / "new.csv").unlink()
    with pytest.raises(MissingInputError) as info:
        stage.run(params, "mine")
    assert str(info.value) == (
        f"tasks.mine.files.predict: {tmp_path / 'root' / 'mine' / 'new.csv'}: no such file (the "
        "file this stage scores): put it back, or remove the key")
    assert is_input_error(info.value)
    assert (tmp_path / "predictions" / "mine.parquet").read_bytes() == before


def native_bf16(monkeypatch: pytest.MonkeyPatch, present: bool, amx: bool = False) -> None:
    """This CPU as one with native bf16 or without, and with AMX or without, where
    `inference_dtype` looks them up."""
    monkeypatch.setattr(gpt1.training.device, "cpu_has_native_bf16", lambda: present or amx)
    monkeypatch.setattr(gpt1.training.device, "cpu_has_amx", lambda: amx)


def test_bf16_is_refused_where_the_cpu_would_emulate_it(
        tmp_path: Path, tokenizer_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = make_model(tmp_path / "model", spec("classification", ["neg", "pos"],
                                                 {"text": "review"}), tokenizer_file, 7)
    source = write_csv(tmp_path / "in.csv", "id,review\n1,fine\n")
    native_bf16(monkeypatch, False)
    before = sorted(p.name for p in tmp_path.iterdir())
    result = cli("--model", str(folder), "--input", str(source), "--out",
                 str(tmp_path / "out.csv"), "--device", "cpu", "--precision", "bf16")
    assert result.exit_code == 2, result.output
    assert result.output.count("\n") == 1
    assert result.output.startswith("error: --precision 'bf16': this CPU has no native bf16")
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written
    # auto resolves as before there (fp32), and fp32 is fp32
    for precision in ("auto", "fp32"):
        result = cli("--model", str(folder), "--input", str(source), "--out",
                     str(tmp_path / f"{precision}.csv"), "--device", "cpu", "--precision",
                     precision)
        assert result.exit_code == 0, result.output
    # the stage's precision is fine-tuning's, which computes bf16 wherever asked: not refused
    assert predict_file(folder, source, tmp_path / "stage.csv", device="cpu",
                        precision="bf16") == 1


def test_inference_dtype_refuses_only_emulated_bf16(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpt1.errors import InputError
    from gpt1.training.device import inference_dtype

    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    native_bf16(monkeypatch, False)
    with pytest.raises(InputError, match=r"^--precision 'bf16': this CPU has no native bf16"):
        inference_dtype("bf16", cpu, "--precision")
    assert inference_dtype("auto", cpu) == inference_dtype("fp32", cpu) == torch.float32
    assert inference_dtype("bf16", cuda) == inference_dtype("auto", cuda) == torch.bfloat16
    native_bf16(monkeypatch, True)  # AVX512-BF16 alone: bf16 where asked, auto stays fp32
    assert inference_dtype("bf16", cpu) == torch.bfloat16
    assert inference_dtype("auto", cpu) == torch.float32
    native_bf16(monkeypatch, True, amx=True)
    assert inference_dtype("bf16", cpu) == inference_dtype("auto", cpu) == torch.bfloat16


def test_bf16_where_allowed_labels_as_fp32(tmp_path: Path, tokenizer_file: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """On every CI machine: a CPU without native bf16 is told it has it (it then emulates bf16,
    the same rounding, slower), so the comparison runs wherever the suite does."""
    native_bf16(monkeypatch, True)
    folder = make_model(tmp_path / "model", spec("classification", ["neg", "pos"],
                                                 {"text": "review"}), tokenizer_file, 8)
    source = tmp_path / "in.parquet"
    pq.write_table(pa.table({"review": REVIEWS * 4}), source)
    scored = {}
    for precision in ("fp32", "bf16"):
        out = tmp_path / f"{precision}.parquet"
        result = cli("--model", str(folder), "--input", str(source), "--out", str(out),
                     "--device", "cpu", "--precision", precision)
        assert result.exit_code == 0, result.output
        scored[precision] = pq.read_table(out)
    fp32, bf16 = scored["fp32"], scored["bf16"]
    assert bf16.column("prediction").to_pylist() == fp32.column("prediction").to_pylist()
    np.testing.assert_allclose(bf16.column("probability_pos").to_numpy(),
                               fp32.column("probability_pos").to_numpy(), atol=0.03)
