"""`python -m bench.predict` at tiny sizes: every side scores the same file, every row's label
agrees, and it writes its two tables; the pipeline's time holds the cleaning; bf16's label
agreement is the share of rows alike; a bundle prepared here runs with spaCy blocked; the
reviews file is what a reader of CSV finds in it; the row-by-row check fails on a label that is
no near tie and on probabilities apart."""

from __future__ import annotations

import csv
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from bench import predict
from gpt1.machine import cpu_has_native_bf16

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_predict_bench_writes_its_tables(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    path = predict.main(["--tiny", "--repeats", "2", "--rss-rows", "100,400",
                         "--out", str(tmp_path)])
    assert path == tmp_path / "predict.json"
    result = json.loads(path.read_text())
    printed = capsys.readouterr().out
    assert " 1 torch thread; " in printed.split("\n## ")[0]  # the machine line
    speed, memory = result["tables"]
    assert speed["name"] == "predict: 300 reviews, 1 layer x 32, 2 heads, n_ctx 32, vocab 304"
    assert speed["columns"] == ["side", "precision", "rows", "batch size", "torch threads",
                                "rows/s", "ratio", "ratio, same precision", "labels agree",
                                "target"]
    bf16 = cpu_has_native_bf16()  # measured here where native (or on CUDA)
    names = ["ours", "transformers", *(["ours bf16", "transformers bf16"] if bf16 else [])]
    assert len(speed["rows"]) == len(names)
    rows = dict(zip(names, speed["rows"], strict=True))
    ours, hf = rows["ours"], rows["transformers"]
    assert ours["side"] == "ours: gpt1 predict (read, clean, encode, forward, write)"
    assert hf["side"] == ("transformers: TextCleaner, then pipeline('text-classification') on "
                          "the export")
    settings = result["settings"]
    measured = settings["rows_per_second"]
    assert list(measured) == names
    for name, row in rows.items():
        assert (row["rows"], row["batch size"], row["torch threads"]) == (300, 32, 1)
        assert len(measured[name]) == 2
        assert row["rows/s"] == pytest.approx(statistics.median(measured[name]))
        assert row["ratio"] == pytest.approx(row["rows/s"] / hf["rows/s"])
    assert hf["ratio"] == hf["ratio, same precision"] == 1.0 and hf["labels agree"] is None
    assert (ours["precision"], ours["target"]) == ("fp32", ">= 2x, labels identical")
    # every row's label the same on both sides, probabilities within the tolerance
    assert settings["disagreements"] == 0 and ours["labels agree"] == "100.00%"
    assert 0 <= settings["max_abs_probability_diff"] <= 1e-4
    assert 0 < settings["positive_rows"] < 300  # both labels given: agreeing says something
    agreement = settings["label_agreement_pct"]
    assert agreement["ours vs transformers"] == 100.0
    notes = "\n".join(speed["notes"])
    assert settings["bf16_measured"] is bf16 and settings["cleaned_beforehand"] is False
    if bf16:
        ours_bf16, hf_bf16 = rows["ours bf16"], rows["transformers bf16"]
        assert ours_bf16["precision"] == hf_bf16["precision"] == "bf16"
        assert hf_bf16["side"].endswith("on the export under bf16 autocast")
        assert ours_bf16["ratio, same precision"] == pytest.approx(
            ours_bf16["rows/s"] / hf_bf16["rows/s"])
        assert ours_bf16["target"] == ">= 3x, labels >= 99.5%"
        for name, against in (("ours bf16", "ours"), ("transformers bf16", "transformers")):
            pct = agreement[f"{name} vs {against}"]
            assert 99.0 <= pct <= 100.0 and rows[name]["labels agree"] == f"{pct:.2f}%"
        assert "target: ours bf16 >= 3x the pipeline in fp32 with >= 99.5% of" in notes
    else:
        assert "bf16 not measured: no CUDA here" in notes
    padded = settings["padded_per_real_token"]
    assert 1 <= padded["ours"] <= padded["transformers"]
    assert "0 of 300 rows differ" in notes
    assert "target: ours fp32 >= 2x the pipeline in fp32 with identical labels (" in notes
    assert "TextCleaner (ftfy + spaCy: the export reads cleaned text) over the texts" in notes
    assert "median of 2 alternating repetitions on cpu" in notes
    assert memory["columns"] == ["rows", "input MiB", "peak RSS MiB", "seconds", "ratio"]
    small, large = memory["rows"]
    assert (small["rows"], large["rows"]) == (100, 400)
    assert small["input MiB"] < large["input MiB"]
    assert small["peak RSS MiB"] > 100  # python, torch, spaCy: no process measures less
    assert small["ratio"] == 1.0
    assert large["ratio"] == pytest.approx(large["peak RSS MiB"] / small["peak RSS MiB"])
    assert settings["peak_rss_mib"] == {"100": small["peak RSS MiB"],
                                        "400": large["peak RSS MiB"]}
    assert "target: peak RSS at 400 rows <= 1.2x the peak at 100" in "\n".join(memory["notes"])
    assert "## predict memory: gpt1 predict's peak RSS, 1 layer x 32" in printed


class FakePipeline:
    """A pipeline whose call takes one second of the fake clock and labels every text
    positive."""

    device = torch.device("cpu")

    def __init__(self, events: list[str], now: list[float]) -> None:
        self.events, self.now = events, now

    def __call__(self, texts: list[str], **_: object) -> list[list[dict]]:
        self.events.append(f"classify {texts}")
        self.now[0] += 1.0
        return [[{"label": "positive", "score": 0.75}, {"label": "negative", "score": 0.25}]
                for _ in texts]


def test_the_pipeline_s_time_holds_the_cleaning(monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []
    now = [0.0]

    def clock() -> float:
        events.append("clock")
        return now[0]

    class SlowCleaner:  # ten seconds of the fake clock a text
        def __call__(self, text: str, line_breaks: bool = False) -> str:
            events.append(f"clean {text}")
            now[0] += 10.0
            return text.upper()

    monkeypatch.setattr(predict, "TextCleaner", SlowCleaner)
    monkeypatch.setattr(predict, "time", SimpleNamespace(perf_counter=clock))
    seconds, scored = predict.theirs(FakePipeline(events, now), ["a", "b"], batch_size=2)
    assert events == ["clock", "clean a", "clean b", "classify ['A', 'B']", "clock"]
    assert seconds == 21.0
    assert scored.labels == ["positive"] * 2
    np.testing.assert_allclose(scored.probabilities, [[0.25, 0.75]] * 2)
    # a bundle's texts are cleaned already: handed over as they are, nothing cleaned
    events.clear()
    seconds, _ = predict.theirs(FakePipeline(events, now), ["a b"], 2, cleaner=predict.Cleaned)
    assert events == ["clock", "classify ['a b']", "clock"] and seconds == 1.0


def test_label_agreement_is_the_share_of_rows_alike() -> None:
    fp32 = ["positive", "negative", "negative", "positive", "negative", "positive", "positive",
            "negative"]
    bf16 = ["positive", "negative", "positive", "positive", "negative", "positive", "positive",
            "negative"]  # row 2 flipped: 7 of 8
    assert predict.agreement(bf16, fp32) == predict.agreement(fp32, bf16) == 87.5
    assert predict.agreement(fp32, fp32) == 100.0
    with pytest.raises(ValueError, match="labels of 8 and 7 rows"):
        predict.agreement(bf16, fp32[:7])
    with pytest.raises(ValueError, match="labels of 0 and 0 rows"):
        predict.agreement([], [])


SPACY_BLOCKED = """
import json, sys
sys.modules["spacy"] = None  # `import spacy` raises ImportError, as on a machine without it
from bench import predict
path = predict.main(sys.argv[1:])
assert sys.modules["spacy"] is None, "spaCy imported"
assert not [name for name in sys.modules if name.startswith("spacy.")], "spaCy imported"
print(path)
"""


def test_a_bundle_prepared_here_runs_without_spacy(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    assert predict.main(["--tiny", "--rows", "60", "--prepare", str(bundle)]) == bundle
    assert sorted(p.name for p in bundle.iterdir()) == [
        "bundle.json", "encoded.parquet", "model", "reviews_cleaned.csv", "tokenizer.json"]
    with pytest.raises(SystemExit):  # the memory part runs the CLI, which cleans
        predict.main(["--bundle", str(bundle), "--rss-rows", "100"])
    done = subprocess.run(
        [sys.executable, "-c", SPACY_BLOCKED, "--bundle", str(bundle), "--repeats", "1",
         "--threads", "1", "--out", str(tmp_path)], capture_output=True, text=True,
        cwd=predict.REPO, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "predict.json").read_text())
    (speed,) = result["tables"]  # no memory part
    assert speed["name"].startswith("predict: 60 reviews cleaned beforehand (a bundle: neither "
                                    "side's time holds the cleaning)")
    assert speed["rows"][0]["side"] == "ours: gpt1 predict (read, encode, forward, write)"
    assert speed["rows"][1]["side"] == ("transformers: pipeline('text-classification') on the "
                                        "export")
    settings = result["settings"]
    assert settings["cleaned_beforehand"] is True and settings["rows"] == 60
    assert settings["disagreements"] == 0 and "peak_rss_mib" not in settings
    assert "the cleaned CSV encodes to the rows encoded there (checked)" in "\n".join(
        speed["notes"])


def test_a_bundle_whose_texts_do_not_encode_to_its_rows_is_refused(tmp_path: Path) -> None:
    bundle = predict.save_bundle(tmp_path / "bundle", tiny=True, rows=20)
    inputs = predict.load_bundle(bundle)
    assert inputs.cleaned and len(inputs.texts) == len(inputs.encoded) == 20
    predict.write_texts(bundle / predict.BUNDLE_CSV, ["edited", *inputs.texts[1:]])
    with pytest.raises(ValueError, match=r"its texts do not encode to encoded\.parquet"):
        predict.load_bundle(bundle)


def test_the_reviews_file_reads_back_as_written(tmp_path: Path) -> None:
    pool = ['"Yes," she said.', "It rained, and the quay was closed.", "Fine\u2026",
            "He left."]
    path = predict.write_reviews(tmp_path / "r.csv", pool, 200, seed=7)
    with path.open(encoding="utf-8", newline="") as fh:
        header, *rows = list(csv.reader(fh))
    assert header == ["id", "review"]
    assert [int(i) for i, _ in rows] == list(range(200))
    texts = [text for _, text in rows]
    assert texts == list(predict.reviews(pool, 200, seed=7)) == predict.read_texts(path)
    # each review is 1 to 10 of the pool's sentences, on one line or one per line
    for text in texts:
        assert 1 <= sum(text.count(s) for s in pool) <= 10
        residue = text
        for sentence in pool:
            residue = residue.replace(sentence, "")
        assert residue in (" " * len(residue), "\n" * len(residue))
    assert any("\n" in t for t in texts) and any('"' in t for t in texts)
    assert len({len(t) for t in texts}) > 20
    # a shorter file of the same seed is the longer one's first rows
    assert list(predict.reviews(pool, 50, seed=7)) == texts[:50]


def test_sentences_end_at_their_stop_and_keep_a_closing_quote() -> None:
    found = predict.sentences(['Mara said, "I\'ll go." It was late! Was it? Then\u2026 no'])
    assert found == ['Mara said, "I\'ll go."', "It was late!", "Was it?", "Then\u2026"]


def scored(labels: list[str], positive: list[float]) -> predict.Scored:
    p = np.array(positive)
    return predict.Scored(labels, np.stack([1 - p, p], axis=1))


def test_labels_may_differ_only_at_a_near_tie() -> None:
    ours = scored(["positive", "negative", "negative"], [0.9, 0.2, 0.50004])
    same = predict.compare(ours, scored(["positive", "negative", "negative"],
                                        [0.90001, 0.2, 0.50004]))
    assert (same.rows, same.disagreements, same.positive) == (3, 0, 1)
    assert same.max_abs_diff == pytest.approx(1e-5)
    # row 2's probabilities 0.49996 and 0.50004 are within 1e-4 of each other: either label
    tie = predict.compare(ours, scored(["positive", "negative", "positive"],
                                       [0.9, 0.2, 0.50004]))
    assert tie.disagreements == 1
    with pytest.raises(AssertionError, match=r"row 1: we label it 'negative'.*'positive'"):
        predict.compare(ours, scored(["positive", "positive", "negative"], [0.9, 0.2, 0.50004]))


def test_probabilities_apart_fail_naming_the_row() -> None:
    ours = scored(["positive", "negative"], [0.9, 0.2])
    with pytest.raises(AssertionError, match=r"row 1: .*\|Δ\| 0.0002 > 0.0001"):
        predict.compare(ours, scored(["positive", "negative"], [0.9, 0.2002]))
    with pytest.raises(AssertionError, match="2 rows scored by ours, 1 by theirs"):
        predict.compare(ours, scored(["positive"], [0.9]))


def test_the_model_is_params_yaml_s_shape_and_its_head_balanced(tmp_path: Path) -> None:
    import yaml

    model = yaml.safe_load((predict.REPO / "params.yaml").read_text())["model"]
    cfg = predict.make_config(False, 500)
    assert (cfg.n_ctx, cfg.n_embd, cfg.n_layer, cfg.n_head, cfg.vocab_size) == (
        model["n_ctx"], model["n_embd"], model["n_layer"], model["n_head"], 500)
    small = predict.make_config(False, 500, predict.RSS_MODEL)
    assert (small.n_ctx, small.n_embd, small.n_layer) == (model["n_ctx"], 32, 1)
    # the tiny model, balanced on the calibration reviews: about half each way
    texts = predict.paragraphs(tiny=True)[:200]
    tok = predict.make_tokenizer(tmp_path / "tok.json", texts, tiny=True)
    folder = predict.make_model(tmp_path / "model", tmp_path / "tok.json",
                                predict.make_config(True, tok.vocab_size),
                                predict.sentences(texts))
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "model.safetensors",
                                                        "task.json", "tokenizer.json"]
    from gpt1.downstream.standalone import load_finetuned

    loaded = load_finetuned(folder)
    assert loaded.card.spec.labels == ["negative", "positive"] and loaded.card.n_ctx == 32
    bias = loaded.model.head.bias.detach()
    assert torch.equal(bias[0], -bias[1]) and bool(bias.abs().max() > 0)


def test_peak_rss_is_the_child_s_own_not_the_bench_s() -> None:
    """A process forked from a large one starts with the large one's high-water mark: the bench
    holds 300 MiB here, and a child that allocates nothing still reads as small, one that
    fills 200 MiB as at least that."""
    held = b"x" * (300 << 20)  # touched: resident in this process
    idle, _ = predict.peak_rss([sys.executable, "-c", "pass"])
    filled, _ = predict.peak_rss([sys.executable, "-c", "b = b'x' * (200 << 20)"])
    assert len(held) == 300 << 20
    assert 1 < idle < 100
    assert 200 < filled < 300
    with pytest.raises(RuntimeError, match="exited 3: "):
        predict.peak_rss([sys.executable, "-c", "raise SystemExit(3)"])


def test_padding_counts_each_batch_at_its_longest() -> None:
    # file order: [1, 5] [1, 5] [3] -> 5 + 5 + 5 + 5 + 3; read 4 rows at a time and sorted:
    # [1, 1] [5, 5] [3] -> 1 + 1 + 5 + 5 + 3; 15 real tokens
    assert predict.padding([1, 5, 1, 5, 3], 2, 4) == (1.0, pytest.approx(23 / 15))
    # read 2 rows at a time, nothing to sort across pairs: the file's order
    assert predict.padding([1, 5, 1, 5, 3], 2, 2) == (pytest.approx(23 / 15),) * 2
