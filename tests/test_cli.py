"""The folders a command writes (`--out` of export-hf, import-hf, import-openai and predict): a
folder git, DVC or the pipeline owns is refused whatever `--force` says, in one line naming it,
and left as it was: `.git` and `.dvc` and anything in them, the checkout's root and any folder
above it, DVC's cache where `dvc cache dir` moved it, a stage's output and anything in it, and
a folder a stage's output lies in, anything inside a top folder where stages write
(artifacts/checkpoints, which DVC cannot restore), the data root params.yaml names, and the
command's own input. A folder of the user's own is still replaced with --force.

Every command's --help reads in an 80-column terminal: nothing cut or wider, and each command
listed with a one-line summary."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import typer.main
from typer.core import TyperGroup
from typer.testing import CliRunner

from gpt1.cli import app
from gpt1.interop.hf import export_hf
from gpt1.model.registry import save_model
from gpt1.model.transformer import GPT1, GPT1Config
from gpt1.presets.edit import set_keys
from tests.conftest import REPO

pytestmark = pytest.mark.usefixtures("one_torch_thread")

REFUSED = "refusing to write there, even with --force: write elsewhere"


@pytest.fixture()
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A checkout (its dvc.yaml, .git, .dvc with its cache moved out by `dvc cache dir`) with
    pipeline outputs and the pretraining checkpoints beside them, as the working directory; a
    model to export and its HF directory to import lie outside it."""
    repo = tmp_path / "repo"
    repo.mkdir()
    shutil.copy(REPO / "dvc.yaml", repo / "dvc.yaml")
    shutil.copy(REPO / "params.yaml", repo / "params.yaml")
    set_keys(repo / "params.yaml", {"ingest.root": "../data"})
    (tmp_path / "data" / "glue").mkdir(parents=True)
    (tmp_path / "data" / "glue" / "train.tsv").write_text("sentence\tlabel\nfine\t1\n")
    (repo / ".git").mkdir()
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (repo / ".dvc" / "tmp").mkdir(parents=True)
    (repo / ".dvc" / "config").write_text("[core]\n    analytics = false\n[cache]\n"
                                          "    dir = ../../dvc-cache\n")
    cache = tmp_path / "dvc-cache" / "files" / "md5" / "ab"
    cache.mkdir(parents=True)
    (cache / "cdef").write_text("cached")
    for rel in ("artifacts/bpe/tokenizer.json", "artifacts/pretrain/model.safetensors",
                "artifacts/checkpoints/pretrain/step-00000020.pt", "metrics/pretrain.json"):
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(rel)
    torch.manual_seed(0)
    model = tmp_path / "model"
    model.mkdir()
    save_model(GPT1(GPT1Config(vocab_size=20, n_ctx=8, n_embd=8, n_layer=1, n_head=2)), model)
    export_hf(model, tmp_path / "hf")
    monkeypatch.chdir(repo)
    return repo


def snapshot(folder: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else None
            for p in sorted(folder.rglob("*"))}


def invoke(*args: str | Path) -> tuple[int, str]:
    result = CliRunner().invoke(app, [str(a) for a in args])
    return result.exit_code, result.output


def _commands(tmp_path: Path) -> dict[str, tuple[str | Path, ...]]:
    return {"export-hf": ("export-hf", "--model", tmp_path / "model", "--force"),
            "import-hf": ("import-hf", "--hf", tmp_path / "hf", "--force"),
            "import-openai": ("import-openai", "--release", tmp_path / "nowhere", "--force")}


@pytest.mark.parametrize("command", ["export-hf", "import-hf", "import-openai"])
def test_force_never_replaces_what_git_dvc_or_the_pipeline_owns(project: Path, tmp_path: Path,
                                                                command: str) -> None:
    cache = (tmp_path / "dvc-cache").resolve()
    dvc_yaml = project.resolve() / "dvc.yaml"
    data = (tmp_path / "data").resolve()
    refused = {
        ".": f"--out .: the root of the repository at {project.resolve()}; {REFUSED}",
        "..": f"--out ..: holds the repository at {project.resolve()}; {REFUSED}",
        str(project): f"--out {project}: the root of the repository at {project.resolve()}; "
                      f"{REFUSED}",
        ".git": f"--out .git: inside {project.resolve() / '.git'}, git's own state; {REFUSED}",
        ".git/hf": f"--out .git/hf: inside {project.resolve() / '.git'}, git's own state; "
                   f"{REFUSED}",
        ".dvc/tmp": f"--out .dvc/tmp: inside {project.resolve() / '.dvc'}, DVC's own state and "
                    f"cache; {REFUSED}",
        str(cache): f"--out {cache}: the DVC cache of {project.resolve()}; {REFUSED}",
        str(cache / "files"): f"--out {cache / 'files'}: inside {cache}, DVC's cache; {REFUSED}",
        "artifacts": f"--out artifacts: holds bpe, checkpoints, pretrain; outputs of stages bpe, "
                     f"code, finetune and 3 more in {dvc_yaml} lie inside it; refusing to "
                     "replace it, even with --force: write elsewhere",
        "metrics": f"--out metrics: holds pretrain.json; outputs of stages ablation, bpe, clean "
                   f"and 10 more in {dvc_yaml} lie inside it; refusing to replace it, even with "
                   "--force: write elsewhere",
        "artifacts/pretrain": f"--out artifacts/pretrain: inside artifacts/pretrain, an output "
                              f"of stage pretrain in {dvc_yaml}; DVC owns what is there: write "
                              "elsewhere",
        # no stage's output, but beside them: the checkpoints, which DVC cannot restore
        "artifacts/checkpoints": f"--out artifacts/checkpoints: inside "
                                 f"{project.resolve() / 'artifacts'}, where stages of {dvc_yaml} "
                                 f"write (bpe, code, finetune and 3 more); {REFUSED}",
        "../data/glue": f"--out ../data/glue: inside {data}, the data root (ingest.root in "
                        f"{project / 'params.yaml'}); {REFUSED}",
        "../data": f"--out ../data: inside {data}, the data root (ingest.root in "
                   f"{project / 'params.yaml'}); {REFUSED}",
    }
    before = snapshot(tmp_path)
    for out, message in refused.items():
        code, output = invoke(*_commands(tmp_path)[command], "--out", out)
        assert (code, output) == (2, f"error: {message}\n"), out
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("command", ["export-hf", "import-hf"])
def test_a_command_never_writes_over_its_own_input(project: Path, tmp_path: Path,
                                                   command: str) -> None:
    mine = tmp_path / "mine"
    source = mine / "source"
    shutil.copytree(tmp_path / ("model" if command == "export-hf" else "hf"), source)
    option = "--model" if command == "export-hf" else "--hf"
    before = snapshot(tmp_path)
    for out, relation in ((source, "is"), (source / "sub", "inside"), (mine, "holds")):
        code, output = invoke(command, option, source, "--force", "--out", out)
        assert (code, output) == (2, f"error: --out {out}: {relation} the input {source}; "
                                     f"{REFUSED}\n"), out
    assert snapshot(tmp_path) == before


def test_a_folder_of_ones_own_is_still_replaced_with_force(project: Path, tmp_path: Path) -> None:
    mine = project / "exports" / "hf"
    mine.mkdir(parents=True)
    (mine / "notes.txt").write_text("mine")
    code, output = invoke("export-hf", "--model", tmp_path / "model", "--out", mine)
    assert code == 2 and "(--force replaces it)" in output, output
    code, output = invoke("export-hf", "--model", tmp_path / "model", "--out", mine, "--force")
    assert code == 0, output
    assert not (mine / "notes.txt").exists() and (mine / "model.safetensors").is_file()
    # the pretraining checkpoints are a folder of no stage's output: outside its checks
    assert (project / "artifacts/checkpoints/pretrain/step-00000020.pt").is_file()


def test_predict_never_writes_into_git_dvc_the_pipeline_or_its_data(project: Path,
                                                                    tmp_path: Path) -> None:
    dvc_yaml = project.resolve() / "dvc.yaml"
    data, params = (tmp_path / "data").resolve(), project / "params.yaml"
    refused = {
        ".git/rows.csv": f"inside {project.resolve() / '.git'}, git's own state; {REFUSED}",
        ".dvc/rows.csv": f"inside {project.resolve() / '.dvc'}, DVC's own state and cache; "
                         f"{REFUSED}",
        "artifacts/finetune/sst2/rows.csv": f"inside artifacts/finetune/, an output of stage "
                                            f"finetune in {dvc_yaml}; DVC owns what is there: "
                                            "write elsewhere",
        "artifacts/checkpoints/rows.csv": f"inside {project.resolve() / 'artifacts'}, where "
                                          f"stages of {dvc_yaml} write (bpe, code, finetune and "
                                          f"3 more); {REFUSED}",
        # a task's training rows, replaced by scored rows with exit 0 before
        "../data/glue/train.tsv": f"inside {data}, the data root (ingest.root in {params}); "
                                  f"{REFUSED}",
    }
    before = snapshot(tmp_path)
    for out, message in refused.items():
        code, output = invoke("predict", "--model", tmp_path / "model", "--input",
                              tmp_path / "rows.csv", "--out", out, "--force")
        assert (code, output) == (2, f"error: --out {out}: {message}\n"), out
    assert snapshot(tmp_path) == before


def test_params_edits_rewrite_the_stage_lists_and_gpt1_dag_says_so(tmp_path: Path) -> None:
    """`gpt1 set` and `gpt1 preset` in a pipeline's checkout leave dag.yaml listing the stages
    the edited params ask for; `gpt1 dag` then finds it up to date and names them."""
    for name in ("dvc.yaml", "params.yaml", "dag.yaml"):
        shutil.copy(REPO / name, tmp_path / name)
    params = tmp_path / "params.yaml"
    assert invoke("set", "finetune.tasks=[sst2, cola]", "--params", params)[0] == 0
    assert '  finetune: ["cola", "sst2"]' in (tmp_path / "dag.yaml").read_text()
    assert invoke("preset", "tiny", "--params", params)[0] == 0
    code, out = invoke("dag", "--params", params)
    assert code == 0 and out.startswith(f"{tmp_path / 'dag.yaml'}: up to date;")
    assert "finetune@cola, finetune@sst2" in out and "finetune@rte" not in out
    (tmp_path / "dag.yaml").write_text("dag: {}\n")  # stale, as after a hand edit
    code, out = invoke("dag", "--params", params)
    assert code == 0 and ": written;" in out
    assert '  finetune: ["cola", "sst2"]' in (tmp_path / "dag.yaml").read_text()


def _commands_under(command: object, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """The argument lists naming `command` and every command and subcommand below it."""
    yield path
    if isinstance(command, TyperGroup):
        for name, sub in command.commands.items():
            yield from _commands_under(sub, (*path, name))


COMMANDS = list(_commands_under(typer.main.get_command(app)))


def _help(path: tuple[str, ...], columns: int) -> str:
    """`gpt1 <path> --help` as a terminal `columns` wide shows it (a process of its own, as
    CliRunner lays click's help out 80 wide whatever COLUMNS says)."""
    proc = subprocess.run([sys.executable, "-m", "gpt1.cli", *path, "--help"], cwd=REPO,
                          capture_output=True, text=True, check=True,
                          env={"COLUMNS": str(columns), "PYTHONPATH": str(REPO),
                               "PATH": str(Path(sys.executable).parent)})
    return proc.stdout


def _summary(help_text: str) -> str:
    """The first paragraph under a help page's Usage line, its lines joined (box edges off)."""
    lines = [line.strip(" │") for line in help_text.splitlines()]
    below = lines[next(i for i, line in enumerate(lines) if line.startswith("Usage:")) + 1:]
    paragraph = below[next(i for i, line in enumerate(below) if line):]
    return " ".join(paragraph[:paragraph.index("")])


def _listed(help_text: str) -> list[tuple[str, str]]:
    """The rows of a group's help page's command list: (name, summary) each (box edges off)."""
    lines = [line.strip(" │") for line in help_text.splitlines()]
    rows = []
    for line in lines[next(i for i, line in enumerate(lines) if "Commands" in line) + 1:]:
        if not line or line.startswith("╰"):
            break
        name, _, summary = line.partition(" ")
        rows.append((name, summary.strip()))
    return rows


def test_the_terminal_width_reaches_the_help_pages() -> None:
    """COLUMNS is what the help pages below are laid out for: narrower, they are narrower."""
    assert max(map(len, _help(("task", "add"), 60).splitlines())) <= 60
    assert _help(("task", "add"), 60) != _help(("task", "add"), 80)


@pytest.mark.parametrize("path", COMMANDS, ids=lambda path: " ".join(("gpt1", *path)))
def test_every_help_page_reads_in_80_columns(path: tuple[str, ...]) -> None:
    """No line wider than the terminal, no option name or help cut short with an ellipsis, and
    a group lists each of its commands on one line, with the summary its own page opens with."""
    text = _help(path, 80)
    too_wide = [line for line in text.splitlines() if len(line) > 80]
    assert not too_wide and "…" not in text, text
    subcommands = [sub[-1] for sub in COMMANDS if sub[:-1] == path and sub]
    if subcommands:
        listed = _listed(text)
        assert [name for name, _ in listed] == subcommands, text
        for name, summary in listed:
            assert summary == _summary(_help((*path, name), 80)), text
