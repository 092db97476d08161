"""gpt1.data_root: what DVC cannot hash under the data root (a FIFO made `dvc status` hang, a
symlink loop failed every dvc command) is one line naming the file, from `gpt1 dag`, `gpt1 task
add` and the ingest stage alike, before DVC meets it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpt1 import dag
from gpt1.cli import app
from gpt1.config import load_params
from gpt1.data_root import check_data_root
from gpt1.errors import InputError
from gpt1.jobs.ingest import ingest
from gpt1.presets.edit import set_keys
from tests.conftest import REPO


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    """A data root of ordinary files and folders, and a symlink to a file outside it."""
    data = tmp_path / "data"
    (data / "glue" / "SST-2").mkdir(parents=True)
    (data / "glue" / "SST-2" / "train.tsv").write_text("sentence\tlabel\nfine\t1\n")
    (tmp_path / "elsewhere.txt").write_text("a book\n")
    (data / "book.txt").symlink_to(tmp_path / "elsewhere.txt")
    return data


def test_files_folders_and_links_to_files_pass(root: Path) -> None:
    check_data_root(root)
    check_data_root(root / "nowhere")  # no folder: ingest says so itself


@pytest.mark.parametrize("case", ["fifo", "loop", "dangling", "back up"])
def test_what_dvc_cannot_hash_is_named(root: Path, case: str) -> None:
    where = root / "glue" / "x"
    if case == "fifo":
        os.mkfifo(where)
        said = f"ingest.root: {where} is a FIFO (named pipe), not a file: DVC would wait on it " \
               "forever hashing the data root; remove it from there"
    elif case == "loop":
        where.symlink_to(root / "glue" / "y")
        (root / "glue" / "y").symlink_to(where)
        said = f"ingest.root: {where} is a symlink that loops; DVC fails on it: remove it from " \
               "the data root"
    elif case == "dangling":
        where.symlink_to(root / "gone")
        said = f"ingest.root: {where} is a symlink to nothing ({root / 'gone'}); remove it from " \
               "the data root"
    else:
        where.symlink_to(root)
        said = f"ingest.root: {where} leads back to a folder above it, a loop DVC fails on: " \
               "remove the link from the data root"
    with pytest.raises(InputError) as caught:
        check_data_root(root)
    assert str(caught.value) == said


def test_what_hands_the_checkout_to_dvc_refuses_before_writing_dag_yaml(root: Path,
                                                                       tmp_path: Path) -> None:
    """`gpt1.dag.prepare`, which `gpt1 dag` and the flows call before DVC runs."""
    repo = tmp_path / "repo"
    repo.mkdir()
    shutil.copy(REPO / "params.yaml", repo / "params.yaml")
    set_keys(repo / "params.yaml", {"ingest.root": str(root)})
    os.mkfifo(root / "pipe")
    with pytest.raises(InputError, match="is a FIFO"):
        dag.prepare(repo, load_params(repo / "params.yaml"))
    assert not (repo / "dag.yaml").exists()


def test_gpt1_dag_task_add_and_ingest_refuse_a_fifo(root: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    for name in ("params.yaml", "dvc.yaml"):
        shutil.copy(REPO / name, repo / name)
    set_keys(repo / "params.yaml", {"ingest.root": str(root)})
    os.mkfifo(root / "pipe")
    said = f"ingest.root: {root / 'pipe'} is a FIFO (named pipe)"
    result = CliRunner().invoke(app, ["dag", "--params", str(repo / "params.yaml")])
    assert result.exit_code == 2 and result.output.startswith(f"error: {said}"), result.output
    assert not (repo / "dag.yaml").exists()
    before = (repo / "params.yaml").read_text()
    result = CliRunner().invoke(app, [
        "task", "add", "mine", "--params", str(repo / "params.yaml"), "--family",
        "classification", "--train", str(root / "glue" / "SST-2" / "train.tsv"),
        "--text-column", "sentence", "--labels", "0,1"])
    assert result.exit_code == 2 and result.output.startswith(f"error: {said}"), result.output
    assert (repo / "params.yaml").read_text() == before
    with pytest.raises(InputError, match="is a FIFO"):
        ingest(load_params(repo / "params.yaml"), tmp_path / "corpus", tmp_path / "tasks")
    assert not (tmp_path / "corpus").exists() and not (tmp_path / "tasks").exists()
