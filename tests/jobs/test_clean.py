"""gpt1.jobs.clean: stage clean's job, clean_folder, writes the clean table and its stats in place
of the folder, or fails leaving it as it was."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from gpt1.config import CleanParams, ExecutorParams
from gpt1.errors import InputError
from gpt1.jobs.clean import clean_folder
from tests.clean_docs import DOCS_1, DOCS_2, MIN_CHARS, write_inputs


@pytest.fixture()
def inputs(tmp_path: Path) -> list[Path]:
    return write_inputs(tmp_path)


def test_clean_folder_replaces_the_folder_with_the_table_and_its_stats(
        inputs: list[Path], tmp_path: Path) -> None:
    out = tmp_path / "clean"
    out.mkdir()
    (out / "stale.txt").write_text("from an earlier run")
    params = CleanParams(batch_docs=2, min_chars=MIN_CHARS, dedupe=True)
    stats = clean_folder(tmp_path, out, params, ExecutorParams(workers=1))
    assert sorted(os.listdir(out)) == ["corpus.parquet", "stats.json"]
    assert pq.read_table(out / "corpus.parquet").column("id").to_pylist() == [
        "b1#0", "b1#3", "b2#1", "b2#3"]
    chars_in = sum(len(t) for _, t in DOCS_1 + DOCS_2)
    assert (out / "stats.json").read_text() == (
        f'{{\n  "docs_in": 10,\n  "docs_out": 4,\n  "chars_in": {chars_in},\n'
        f'  "chars_out": {stats.chars_out},\n  "dropped": {{\n    "empty": 2,\n'
        '    "too_short": 2,\n    "duplicate": 2\n  }\n}\n')


def test_clean_folder_without_input_or_with_nothing_left_fails_as_bad_input(
        inputs: list[Path], tmp_path: Path) -> None:
    out = tmp_path / "clean"
    out.mkdir()
    (out / "kept.txt").write_text("from an earlier run")
    executor = ExecutorParams(workers=1)
    (tmp_path / "raw").mkdir()
    with pytest.raises(FileNotFoundError, match=rf"^{tmp_path / 'raw'}: no Parquet files \(run "
                                                r"the ingest stage first\)$"):
        clean_folder(tmp_path / "raw", out, CleanParams(batch_docs=2, min_chars=1, dedupe=True),
                     executor)
    with pytest.raises(InputError, match=r"^clean: every document was dropped \(\{"):
        clean_folder(tmp_path, out, CleanParams(batch_docs=2, min_chars=10_000, dedupe=True),
                     executor)
    assert os.listdir(out) == ["kept.txt"]
