"""tasks.stage's verdicts: what the user gave (params.yaml, the data root, a release folder) is
bad input when it is wrong, even when it breaks while the stage runs; a file the program itself
needs that is missing is a bug (a traceback, verdict `bug`, retried), not bad input."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest

from gpt1.config import Params
from gpt1.errors import InputError, MissingInputError, is_input_error
from gpt1.presets.edit import nest, update_params
from tasks.stage import main, user_paths, verdict_path
from tests.stage_shell import run_stage

INTERNAL = "/nonexistent/internal/cache.bin"


def _verdict(root: Path) -> dict[str, str]:
    return json.loads(verdict_path(root, "pretrain").read_text())


# -- params.yaml that breaks while the stage runs ----------------------------------------------


@pytest.mark.parametrize(("broken", "message"), [
    (b"model:\n  n_ctx: [64\n", "params.yaml:3:1: not valid YAML: "),
    (b"model:\n  n_ctx: 64\nmodel:\n  n_ctx: 32\n", 'params.yaml:3:1: not valid YAML: '
                                                    'while constructing a mapping'),
    (b"model: {n_ctx: 64} # caf\xe9\n", "params.yaml: not UTF-8 text (byte 24)"),
])
def test_params_broken_while_the_stage_ran_are_bad_input(stage_dir: Path, broken: bytes,
                                                         message: str,
                                                         caplog: pytest.LogCaptureFixture
                                                         ) -> None:
    def break_params(params: Params) -> None:
        Path("params.yaml").write_bytes(broken)

    assert run_stage(break_params, caplog) == 2
    assert f"stage pretrain failed: {message}" in caplog.text
    assert "it changed while the stage ran: mend it and run the stage again" in caplog.text
    verdict = _verdict(stage_dir)
    assert verdict["verdict"] == "input_error" and verdict["message"].startswith(message)
    assert not (stage_dir / "metrics/stages/pretrain.json").exists()


def test_params_not_utf8_at_the_start_are_bad_input(stage_dir: Path,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    (stage_dir / "params.yaml").write_bytes(b"model: {n_ctx: 64}  # caf\xe9\n")
    assert run_stage(lambda params: None, caplog) == 2
    assert "stage pretrain failed: params.yaml: not UTF-8 text (byte 25)" in caplog.text
    assert _verdict(stage_dir)["verdict"] == "input_error"


def test_a_dvc_yaml_not_yaml_is_bad_input(stage_dir: Path,
                                          caplog: pytest.LogCaptureFixture) -> None:
    (stage_dir / "dvc.yaml").write_text("stages:\n  s: [cmd\n")
    assert run_stage(lambda params: None, caplog) == 2
    assert "stage pretrain failed: dvc.yaml:3:1: not valid YAML" in caplog.text


# -- OSErrors: the user's paths, and the program's own ----------------------------------------


def test_a_missing_file_the_program_needs_is_a_bug(stage_dir: Path) -> None:
    """Neither the user's path nor wrapped as bad input where it is opened: a traceback, the
    verdict `bug` (which the flows retry)."""
    def needs_a_cache(params: Params) -> None:
        open(INTERNAL, "rb")  # noqa: SIM115 - it fails

    with pytest.raises(FileNotFoundError) as raised:
        main("pretrain", needs_a_cache, argv=[])
    assert raised.value.filename == INTERNAL
    assert _verdict(stage_dir) == {"stage": "pretrain", "verdict": "bug",
                                   "message": repr(raised.value)}


def test_an_output_folder_of_the_checkout_gone_missing_is_a_bug(stage_dir: Path) -> None:
    def write_into_nothing(params: Params) -> None:
        (stage_dir / "artifacts/nowhere/x.bin").write_bytes(b"")

    with pytest.raises(FileNotFoundError):
        main("pretrain", write_into_nothing, argv=[])
    assert _verdict(stage_dir)["verdict"] == "bug"


@pytest.mark.parametrize("opened", [
    "gpt1/sample_data/corpus/99_missing.txt",  # under the data root (ingest.root)
    "params.yaml/nested",  # the params file (ENOTDIR)
])
def test_a_path_the_user_gave_is_bad_input(stage_dir: Path, opened: str,
                                           caplog: pytest.LogCaptureFixture) -> None:
    def read_it(params: Params) -> None:
        Path(opened).read_text()

    assert run_stage(read_it, caplog) == 2
    assert "stage pretrain failed: [Errno " in caplog.text and opened in caplog.text
    assert _verdict(stage_dir)["verdict"] == "input_error"


def test_a_release_folder_named_in_params_is_the_users(stage_dir: Path,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    update_params(stage_dir / "params.yaml",
                  nest({"pretrain.source": "hf", "pretrain.source_dir": "releases/gpt"}))

    def import_it(params: Params) -> None:
        (Path(params.pretrain.source_dir) / "config.json").read_text()

    assert run_stage(import_it, caplog) == 2
    assert "releases/gpt/config.json" in caplog.text


def test_wrapped_where_it_is_opened_it_is_bad_input_wherever_it_lies(
        stage_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    def wrapped(params: Params) -> None:
        raise MissingInputError(f"{INTERNAL}: not found (run the pretrain stage first)")

    assert run_stage(wrapped, caplog) == 2
    assert f"stage pretrain failed: {INTERNAL}: not found (run the pretrain stage first)" in \
        caplog.text


def test_the_rule() -> None:
    given = [*user_paths(Path("params.yaml"), None), Path("data/root")]
    assert is_input_error(InputError("x"), given)
    assert is_input_error(MissingInputError("x: not found"), given)
    for code in (errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS):
        assert is_input_error(OSError(code, "x", INTERNAL), given)  # the machine's state
    for code in (errno.ENOENT, errno.ENOTDIR, errno.EISDIR):
        assert not is_input_error(OSError(code, "x", INTERNAL), given)
        assert is_input_error(OSError(code, "x", "data/root/books/a.txt"), given)
        assert is_input_error(OSError(code, "x", "./data/root"), given)
        assert not is_input_error(OSError(code, "x", "data/rootless/a.txt"), given)
        assert is_input_error(OSError(code, "x", INTERNAL, None, "params.yaml"), given)
        assert not is_input_error(OSError(code, "x"), given)  # names no file
        assert is_input_error(OSError(code, "x", INTERNAL))  # a command: all paths its user's
    assert not is_input_error(OSError(errno.EIO, "x", "data/root/a.txt"), given)
    assert not is_input_error(KeyError("run"), given)
