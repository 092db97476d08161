"""Every writer of params.yaml (`gpt1 set`, `gpt1 preset`, `gpt1 task add`) reads, changes and
writes it under an exclusive lock on the file: edits made at once are all kept. A read-only
params.yaml is refused in a line naming it; a params.yaml that is a link is edited where it
points, and stays a link."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpt1.cli import app
from gpt1.config import ParamsError, load_params, read_yaml
from gpt1.presets.edit import load_preset, set_task
from tests.conftest import REPO

# keys of four sections, none of which preset tiny sets: (key, a value per round)
KEYS = {"pretrain.seed": (11, 12, 13), "clean.min_chars": (51, 52, 53),
        "tokenize.val_every": (7, 8, 9), "ingest.doc_chars": (15000, 16000, 17000)}


@pytest.fixture()
def params_copy(tmp_path: Path) -> Path:
    dest = tmp_path / "params.yaml"
    shutil.copyfile(REPO / "params.yaml", dest)
    return dest


def _value(raw: dict, dotted: str) -> object:
    node = raw
    for part in dotted.split("."):
        node = node[part]
    return node


def _gpt1(*args: str) -> list[str]:
    return [sys.executable, "-m", "gpt1.cli", *args]


def test_edits_made_at_once_are_all_kept(params_copy: Path) -> None:
    """Four `gpt1 set` on keys of their own and a `gpt1 preset`, started together, three times:
    each prints what it did and exits 0, and every edit is in the file after them."""
    tiny = load_preset("tiny")
    for round_ in range(3):
        commands = [_gpt1("set", "--params", str(params_copy), f"{key}={values[round_]}")
                    for key, values in KEYS.items()]
        commands.append(_gpt1("preset", "tiny", "--params", str(params_copy)))
        procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, cwd=REPO) for cmd in commands]
        for proc in procs:
            out, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err
            assert out.startswith(f"{params_copy}: "), out
        raw = read_yaml(params_copy.read_text(encoding="utf-8"))
        lost = {key: _value(raw, key) for key, values in KEYS.items()
                if _value(raw, key) != values[round_]}
        assert not lost, f"round {round_}: edits lost, these keys hold old values: {lost}"
        assert raw["model"] == tiny["model"] and raw["bpe"] == tiny["bpe"]
        load_params(params_copy)  # and the file is whole
    assert sorted(p.name for p in params_copy.parent.iterdir()) == ["params.yaml"]


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def _listing(folder: Path) -> dict[str, bytes | str]:
    return {p.name: p.read_bytes() if p.is_file() and not p.is_symlink() else os.readlink(p)
            for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("command", [("set", "pretrain.seed=3"), ("preset", "tiny")])
def test_a_read_only_params_file_is_refused_naming_it(params_copy: Path,
                                                      command: tuple[str, ...]) -> None:
    """A 0444 params.yaml: refused in one line naming it (not a temporary beside it), for root
    too, and left as it was, mode included; nothing is left beside it."""
    params_copy.chmod(0o444)
    before = _listing(params_copy.parent)
    code, output = invoke(*command, "--params", str(params_copy))
    assert (code, output) == (2, f"error: {params_copy}: read-only (mode 0444): make it writable "
                                 "(chmod u+w) to edit it\n")
    assert _listing(params_copy.parent) == before
    assert params_copy.stat().st_mode & 0o7777 == 0o444


def test_a_read_only_folder_is_refused_naming_params_yaml(params_copy: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """A folder the user may not write into (0555; root may, so the OS's answer for a user is
    what `os.access` is made to give here): refused naming params.yaml and the folder, before
    any temporary is made beside it."""
    folder = params_copy.parent
    before = _listing(folder)
    folder.chmod(0o555)
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: (
        False if Path(path) == folder and mode & os.W_OK else real_access(path, mode)))
    try:
        code, output = invoke("set", "pretrain.seed=3", "--params", str(params_copy))
    finally:
        folder.chmod(0o755)
    assert code == 2
    assert output.startswith(f"error: {params_copy}: its folder {folder} is read-only"), output
    assert _listing(folder) == before


def test_a_linked_params_file_is_edited_where_it_points(tmp_path: Path) -> None:
    """params.yaml a (relative) link to a shared file: the shared file is edited, atomically in
    its own folder, and params.yaml stays the same link; no temporary is left in either."""
    shared, checkout = tmp_path / "shared", tmp_path / "checkout"
    shared.mkdir()
    checkout.mkdir()
    shutil.copyfile(REPO / "params.yaml", shared / "team.yaml")
    link = checkout / "params.yaml"
    link.symlink_to(Path("..") / "shared" / "team.yaml")
    code, output = invoke("set", "pretrain.seed=3", "--params", str(link))
    assert code == 0, output
    assert link.is_symlink() and os.readlink(link) == "../shared/team.yaml"
    assert load_params(shared / "team.yaml").pretrain.seed == 3
    assert sorted(p.name for p in shared.iterdir()) == ["team.yaml"]
    assert sorted(p.name for p in checkout.iterdir()) == ["params.yaml"]

    code, output = invoke("preset", "tiny", "--params", str(link))
    assert code == 0, output
    assert link.is_symlink() and load_params(link).model.n_embd == 32


def test_a_dangling_link_is_refused_naming_it(tmp_path: Path) -> None:
    link = tmp_path / "params.yaml"
    link.symlink_to("gone.yaml")
    code, output = invoke("set", "pretrain.seed=3", "--params", str(link))
    assert (code, output) == (2, f"error: {link}: a link to gone.yaml, which is not found\n")
    assert link.is_symlink() and sorted(p.name for p in tmp_path.iterdir()) == ["params.yaml"]


def test_a_task_added_meanwhile_is_not_replaced_unless_asked(params_copy: Path) -> None:
    """`gpt1 task add` checks the name before it reads the task's files; the write, under the
    lock, checks it again: a task of that name added in between is refused, not replaced."""
    entry = read_yaml(params_copy.read_text(encoding="utf-8"))["tasks"]["sst2"]
    with pytest.raises(ParamsError, match=r"tasks.sst2 is already in .*params.yaml: choose "
                                          "another name, or --force to replace it"):
        set_task(params_copy, "sst2", {**entry, "title": "mine"}, replace=False)
    set_task(params_copy, "sst2", {**entry, "title": "mine"})
    assert load_params(params_copy).tasks["sst2"].title == "mine"
