"""gpt1.errors.not_found: a path that is not there is named as what it is. A symlink that loops or
points to nothing, given where a model or release folder is read, was reported as the folder's
`config.json: not found`; every command that reads such a folder now names the link."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpt1.cli import app
from gpt1.errors import InputError, MissingInputError, not_found


@pytest.fixture()
def links(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """In the working directory: `loop` (a symlink to itself) and `gone` (to nothing)."""
    monkeypatch.chdir(tmp_path)
    os.symlink("loop", "loop")
    os.symlink("nowhere", "gone")
    return tmp_path


def test_a_missing_path_is_missing(links: Path) -> None:
    error = not_found(Path("folder/config.json"), " (run the pretrain stage first)")
    assert isinstance(error, MissingInputError)
    assert str(error) == "folder/config.json: not found (run the pretrain stage first)"


def test_a_link_on_the_way_is_named(links: Path) -> None:
    loop = not_found(Path("loop/config.json"), " (run the pretrain stage first)")
    assert isinstance(loop, InputError) and str(loop) == "loop: a symlink that loops"
    gone = not_found(Path("gone/config.json"))
    assert isinstance(gone, MissingInputError)
    assert str(gone) == "gone: a symlink to nothing (nowhere)"


@pytest.mark.parametrize("command", [
    ["generate", "--model", "{link}", "--prompt", "a"],
    ["export-hf", "--model", "{link}", "--out", "hf"],
    ["predict", "--model", "{link}", "--input", "in.csv", "--out", "out.csv"],
    ["import-hf", "--hf", "{link}", "--out", "ours"],
    ["import-openai", "--release", "{link}", "--out", "ours"],
], ids=lambda command: command[0])
@pytest.mark.parametrize(("link", "what"), [("loop", "a symlink that loops"),
                                            ("gone", "a symlink to nothing (nowhere)")])
def test_every_command_reading_a_folder_names_the_link(links: Path, command: list[str],
                                                       link: str, what: str) -> None:
    (links / "in.csv").write_text("text\nfine\n")
    before = sorted(p.name for p in links.iterdir())
    result = CliRunner().invoke(app, [arg.format(link=link) for arg in command])
    assert (result.exit_code, result.output) == (2, f"error: {link}: {what}\n")
    assert sorted(p.name for p in links.iterdir()) == before
