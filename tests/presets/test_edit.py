"""gpt1.presets.edit: a preset is overlaid onto a params file, keeping its comments and other
keys.

Every writer of params.yaml (`gpt1 set`, `gpt1 preset`, `gpt1 task add`) reads, changes and
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
from gpt1.presets.edit import (
    _overlay,
    apply_preset,
    available,
    load_preset,
    nest,
    parse_assignments,
    set_keys,
    set_task,
    update_params,
)
from tests.conftest import REPO

REPO_PARAMS = Path(__file__).resolve().parents[2] / "params.yaml"
ANALYSIS_TASKS = tuple(f"analysis.{a}.tasks." for a in ("ablation", "transfer", "zero_shot"))


@pytest.fixture()
def params_copy(tmp_path: Path) -> Path:
    dest = tmp_path / "params.yaml"
    shutil.copyfile(REPO_PARAMS, dest)
    return dest


def _flatten(tree: dict, prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _comments(text: str) -> list[str]:
    return [line[line.index("#"):] for line in text.splitlines() if "#" in line]


def test_available() -> None:
    assert available() == ["books", "default", "paper", "tiny"]


@pytest.mark.parametrize("name", ["tiny", "default", "books", "paper"])
def test_apply_changes_only_preset_keys_and_keeps_comments(params_copy: Path, name: str) -> None:
    before_text = params_copy.read_text()
    before = _flatten(read_yaml(before_text))
    preset = _flatten(load_preset(name))
    apply_preset(name, params_copy)
    after_text = params_copy.read_text()
    after = _flatten(read_yaml(after_text))  # re-read as load_params (and DVC) read it
    # the analyses' task mappings the preset names are its own, whole; every other key stays
    replaced = {k.rsplit(".", 1)[0] + "." for k in preset if k.startswith(ANALYSIS_TASKS)}
    kept = {k: v for k, v in before.items() if not k.startswith(tuple(replaced))}
    assert set(after) == set(kept) | set(preset)
    for key, value in after.items():
        assert value == (preset[key] if key in preset else before[key]), key
    assert _comments(after_text) == _comments(before_text)  # every comment, in order
    load_params(params_copy)  # and the result validates


def test_tiny_values(params_copy: Path) -> None:
    apply_preset("tiny", params_copy)
    params = load_params(params_copy)
    assert (params.model.n_ctx, params.model.n_embd, params.model.n_layer) == (32, 32, 2)
    assert params.bpe.vocab_size == 500
    assert params.pretrain.max_steps == 20
    assert params.finetune.train.epochs == 1
    assert params.pretrain.seed == 1234  # not a preset key: untouched


def test_paper_values_survive_a_round_trip(params_copy: Path) -> None:
    apply_preset("paper", params_copy)
    params = load_params(params_copy)
    assert params.finetune.train.lr == pytest.approx(6.25e-5)
    assert isinstance(params.finetune.train.lr, float)
    assert (params.model.n_layer, params.model.n_embd, params.model.n_ctx) == (12, 768, 512)
    assert (params.model.n_head, params.model.dropout) == (12, 0.1)
    assert params.bpe.vocab_size == 40478
    pre = params.pretrain  # the paper's §4.1 settings, every hyper-parameter
    assert (pre.lr, pre.warmup_steps, pre.schedule) == (2.5e-4, 2000, "cosine")
    assert (pre.batch_size, pre.weight_decay, pre.grad_clip) == (64, 0.01, 1.0)
    ft = params.finetune.train
    assert (ft.batch_size, ft.epochs, ft.warmup_fraction) == (32, 3, 0.002)
    assert (ft.weight_decay, ft.grad_clip, ft.lm_coef, ft.clf_dropout) == (0.01, 1.0, 0.5, 0.1)


def test_presets_are_valid_overlays() -> None:
    base = read_yaml(REPO_PARAMS.read_text(encoding="utf-8"))
    for name in available():
        preset = _flatten(load_preset(name))
        assert preset, name
        fixed = {k for k in preset if not k.startswith(ANALYSIS_TASKS)}  # those are task names
        assert fixed <= set(_flatten(base)), name


def test_unchanged_lines_stay_byte_identical(params_copy: Path) -> None:
    """A no-op preset is a no-op on the text too (ruamel would write `null` as an empty value
    and re-flow lists unless told otherwise)."""
    before = params_copy.read_text()
    apply_preset("default", params_copy)  # params.yaml already holds the default values
    after = params_copy.read_text()
    changed = [(a, b) for a, b in zip(before.splitlines(), after.splitlines(), strict=True)
               if a != b]
    assert not changed, f"lines rewritten by a no-op preset: {changed}"


def test_unknown_preset(params_copy: Path) -> None:
    before = params_copy.read_bytes()
    with pytest.raises(ParamsError,
                       match=r"unknown preset 'huge'.*\['books', 'default', 'paper', 'tiny'\]"):
        apply_preset("huge", params_copy)
    assert params_copy.read_bytes() == before


def test_invalid_result_is_not_written(params_copy: Path) -> None:
    text = params_copy.read_text().replace("min_chars: 100", "min_chars: -5")
    params_copy.write_text(text)
    with pytest.raises(ParamsError) as info:
        apply_preset("tiny", params_copy)
    assert "clean.min_chars" in str(info.value) and str(params_copy) in str(info.value)
    assert params_copy.read_text() == text
    assert sorted(p.name for p in params_copy.parent.iterdir()) == ["params.yaml"]


def test_overlay_rejects_keys_missing_from_params() -> None:
    target = {"model": {"n_ctx": 1}}
    with pytest.raises(ParamsError, match=r"key model\.n_embed does not exist"):
        _overlay(target, {"model": {"n_embed": 3}}, "")
    _overlay(target, {"model": {"n_ctx": 5}}, "")
    assert target == {"model": {"n_ctx": 5}}


def test_nest_and_parse_assignments() -> None:
    assert nest({"a.b": 1, "a.c": 2, "d": 3}) == {"a": {"b": 1, "c": 2}, "d": 3}
    assert parse_assignments(["ingest.root=../shared/data", "model.n_ctx=64",
                              "ingest.corpus=[a/*.txt, b.txt]", "ingest.max_dev_examples=null"]
                             ) == {"ingest.root": "../shared/data", "model.n_ctx": 64,
                                   "ingest.corpus": ["a/*.txt", "b.txt"],
                                   "ingest.max_dev_examples": None}
    for bad in ("no-equals-sign", "=5"):
        with pytest.raises(ParamsError, match="expected KEY=VALUE"):
            parse_assignments([bad])
    with pytest.raises(ParamsError, match=r"^model\.n_ctx: '\[64' is not valid YAML: "):
        parse_assignments(["model.n_ctx=[64"])


def test_values_are_written_as_dvc_reads_them(params_copy: Path) -> None:
    """`gpt1 set` reads a value as YAML 1.2, as DVC reads params.yaml: `1e-3` is a number (YAML
    1.1 made it a string, which params.yaml would have held quoted)."""
    set_keys(params_copy, parse_assignments(["pretrain.lr=1e-3"]))
    assert "  lr: 0.001" in params_copy.read_text().splitlines()
    assert load_params(params_copy).pretrain.lr == 0.001


def test_update_params_sets_keys_and_keeps_the_rest(params_copy: Path) -> None:
    before = params_copy.read_text().splitlines()
    set_keys(params_copy, parse_assignments(
        ["ingest.max_train_examples=300", "ingest.corpus=[books/a.txt]"]))
    after = params_copy.read_text().splitlines()
    changed = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
    assert len(changed) == 2
    assert all("#" in b for _, b in changed)  # their comments stay on the line
    params = load_params(params_copy)
    assert params.ingest.max_train_examples == 300
    assert params.ingest.corpus == ["books/a.txt"]
    assert any(line.strip().startswith("corpus: [books/a.txt]") for line in after)  # inline


def test_update_params_validates_first(params_copy: Path) -> None:
    before = params_copy.read_bytes()
    with pytest.raises(ParamsError, match=r"model\.n_ctx"):
        update_params(params_copy, {"model": {"n_ctx": "long"}})
    with pytest.raises(ParamsError, match="does not exist"):
        update_params(params_copy, {"model": {"width": 3}})
    assert params_copy.read_bytes() == before
    with pytest.raises(ParamsError, match="not found"):
        update_params(params_copy.parent / "missing.yaml", {"model": {"n_ctx": 8}})


def test_default_preset_is_the_shipped_params(params_copy: Path) -> None:
    """`gpt1 preset default` restores exactly what params.yaml ships with."""
    before = params_copy.read_text()
    apply_preset("default", params_copy)
    assert params_copy.read_text() == before


def test_set_adds_keys_only_where_the_user_names_them(params_copy: Path) -> None:
    set_keys(params_copy, parse_assignments(["tasks.sst2.overrides.lr=0.01",
                                                  "tasks.sst2.paper.dev=90.0"]))
    params = load_params(params_copy)
    assert params.tasks["sst2"].overrides == {"lr": 0.01}
    assert params.tasks["sst2"].paper == {"dev": 90.0}
    with pytest.raises(ParamsError, match=r"params key tasks\.sst2\.lables does not exist"):
        set_keys(params_copy, parse_assignments(["tasks.sst2.lables=[a, b]"]))
    with pytest.raises(ParamsError, match=r"tasks\.sst2\.overrides: unknown keys"):
        set_keys(params_copy, parse_assignments(["tasks.sst2.overrides.speed=3"]))


def test_a_preset_replaces_the_analyses_tasks_whole(params_copy: Path) -> None:
    """books then default leaves default's analyses alone: SST-2, not books' Story Cloze and
    RTE beside it (a merge would keep them)."""
    apply_preset("books", params_copy)
    assert set(load_params(params_copy).analysis.transfer.tasks) == {"story_cloze", "rte"}
    apply_preset("default", params_copy)
    analysis = load_params(params_copy).analysis
    assert analysis.ablation.tasks == {"sst2": [500]}
    assert analysis.transfer.tasks == {"sst2": 500}
    assert analysis.zero_shot.tasks == {"sst2": "sentiment"}
    assert params_copy.read_text() == REPO_PARAMS.read_text()  # back to what the repo ships


def test_set_adds_one_key_to_the_analyses_tasks(params_copy: Path) -> None:
    """`gpt1 set` names one key: the task mapping's other entries stay."""
    set_keys(params_copy, parse_assignments(["analysis.ablation.tasks.rte=[100]"]))
    assert load_params(params_copy).analysis.ablation.tasks == {"sst2": [500], "rte": [100]}


def test_set_replaces_a_mapping_it_is_given(params_copy: Path) -> None:
    """A value given for a key is that key's value: a mapping replaces the mapping, it is not
    merged into it (`{}` empties it)."""
    set_keys(params_copy, parse_assignments(["tasks.sst2.overrides={epochs: 2, lr: 0.01}"]))
    assert load_params(params_copy).tasks["sst2"].overrides == {"epochs": 2, "lr": 0.01}
    set_keys(params_copy, parse_assignments(["tasks.sst2.overrides={}"]))
    assert load_params(params_copy).tasks["sst2"].overrides == {}
    set_keys(params_copy, parse_assignments(["analysis.ablation.tasks={rte: [100]}"]))
    assert load_params(params_copy).analysis.ablation.tasks == {"rte": [100]}


@pytest.mark.parametrize(("assignment", "message"), [
    ("tasks.mytask.title=X", r"tasks\.mytask\.\w+: Field required"),
    ("model.n_ctx.x=5", r"^params key model\.n_ctx\.x: model\.n_ctx is 64, not a mapping of "
                        r"keys$"),
    ("tasks.sst2.files.train.glue=1", r"^params key tasks\.sst2\.files\.train\.glue: "
                                      r"tasks\.sst2\.files\.train is '.*', not a mapping of keys$"),
    ("modle.n_ctx=5", r"^params key modle does not exist$"),
])
def test_set_names_the_key_it_cannot_set(params_copy: Path, assignment: str,
                                         message: str) -> None:
    before = params_copy.read_bytes()
    with pytest.raises(ParamsError, match=message):
        set_keys(params_copy, parse_assignments([assignment]))
    assert params_copy.read_bytes() == before


# keys of four sections, none of which preset tiny sets: (key, a value per round)
KEYS = {"pretrain.seed": (11, 12, 13), "clean.min_chars": (51, 52, 53),
        "tokenize.val_every": (7, 8, 9), "ingest.doc_chars": (15000, 16000, 17000)}




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
