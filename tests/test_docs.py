"""README.md and docs/*.md against the code: every command, flag, module, make target, DVC stage
and params key they name exists, every relative link resolves, the README's DAG names every stage
group, and docs/benchmarks.md is what `python -m bench.pages` writes today. The walkthroughs
(docs/your-data.md, docs/experiments.md) run as written."""

from __future__ import annotations

import ast
import copy
import csv
import importlib.machinery
import importlib.util
import json
import re
import shlex
import shutil
import sys
import tempfile
from functools import cache
from pathlib import Path

import click
import pyarrow.parquet as pq
import pytest
import typer.main

from bench import pages
from gpt1 import dag
from gpt1.cli import app
from gpt1.config import ParamsError, load_params, read_yaml
from gpt1.presets.edit import available, load_preset, parse_assignments, set_keys
from tests.conftest import Reproduced, copy_repo, dvc, only_sst2, run
from tests.own_tables import write_example

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = [README, *sorted((REPO / "docs").glob("*.md"))]
README_MAX_LINES = 150

FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)
INLINE = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)
SUBSTITUTION = re.compile(r"\$\(([^()]*)\)")
# a dotted params key alone in backticks, perhaps with its value (`pretrain.compile: true`)
DOTTED_KEY = re.compile(r"([a-z_][a-z0-9_]*(?:\.[a-z0-9_]+)+)(?:\s*[:=].*)?")
# dotted names that are files, not params keys (`model.safetensors`)
FILE_SUFFIXES = {"arrow", "bin", "bpe", "csv", "html", "json", "lock", "md", "npy", "parquet",
                 "png", "pt", "py", "safetensors", "sh", "toml", "tsv", "txt", "yaml", "yml"}
PYTHONS = {"python", "python3"}


# --- what the docs say ------------------------------------------------------------------------

def _without_code(text: str) -> str:
    """`text` with fenced blocks and inline code removed: what links and headings are read from."""
    return INLINE.sub("", FENCE.sub("", text))


def code_spans(text: str) -> list[str]:
    """Every inline code span, and every line of every fenced block (continuations joined,
    comments dropped) but those marked ```text: a transcript, whose commands may fail on purpose."""
    spans = [m.group(1) for m in INLINE.finditer(FENCE.sub("", text))]
    for block in FENCE.finditer(text):
        if block.group(0).startswith("```text"):
            continue
        for line in block.group(1).replace("\\\n", " ").splitlines():
            spans.append(re.sub(r"(^|\s)#.*$", "", line).strip())
    return [s for s in spans if s]


def commands(span: str) -> list[list[str]]:
    """The shell commands in a code span, each as its words: split at `&&`, `||`, `;`, `|` and
    `$(...)`, with a leading `$ ` prompt and `VAR=value` assignments dropped."""
    inner = SUBSTITUTION.findall(span)
    pieces = re.split(r"&&|\|\||;|\|", SUBSTITUTION.sub("X", span)) + inner
    found = []
    for piece in pieces:
        try:
            words = shlex.split(piece)
        except ValueError:  # an apostrophe in prose code, e.g. `the paper's`
            words = piece.split()
        while words and (words[0] == "$" or re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0])):
            words = words[1:]
        if words:
            found.append(words)
    return found


def _placeholder(word: str) -> bool:
    return "<" in word or word in ("...", "…")


# --- what exists ------------------------------------------------------------------------------

@cache
def cli_commands() -> dict[str, set[str]]:
    """`gpt1` subcommand (`task add`, for a command of a sub-group) -> its option names (and
    --help)."""

    def options(cmd: click.Command) -> set[str]:
        return {"--help", *(o for p in cmd.params for o in (*p.opts, *p.secondary_opts)
                            if o.startswith("-"))}

    found = {}
    for name, cmd in typer.main.get_command(app).commands.items():
        found[name] = options(cmd)
        for sub_name, sub in getattr(cmd, "commands", {}).items():
            found[f"{name} {sub_name}"] = options(sub)
    return found


@cache
def make_targets() -> set[str]:
    text = (REPO / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"^([A-Za-z][\w-]*)\s*:(?!=)", text, re.M))


@cache
def params() -> dict:
    return read_yaml((REPO / "params.yaml").read_text(encoding="utf-8"))


def _overlaid(base: dict, overlay: dict) -> dict:
    """`overlay` onto a copy of `base` as `gpt1 preset` does: mappings merged, the rest replaced."""
    out = copy.deepcopy(base)
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _overlaid(out[key], value)
        else:
            out[key] = value
    return out


def _lookup(tree: dict, dotted: str) -> object:
    node: object = tree
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            raise KeyError(dotted)
        node = node[part]
    return node


def _items(value: object) -> list[str]:
    return [str(v) for v in (value.keys() if isinstance(value, dict) else value)]


@cache
def dvc_stages() -> dict[str, set[str] | None]:
    """Stage group -> the names after `@` DVC declares for it (gpt1.dag's lists, which dvc.yaml
    iterates over) under params.yaml or any preset overlaid on it (None for a plain stage)."""
    from gpt1.config import parse_params

    variants = [params(), *(_overlaid(params(), load_preset(name)) for name in available())]
    groups: dict[str, set[str] | None] = {}
    for tree in variants:
        for address in dag.resolve(parse_params(tree), REPO).stages():
            name, at, key = address.partition("@")
            if at:
                groups.setdefault(name, set()).add(key)  # type: ignore[union-attr]
            else:
                groups[name] = None
    return groups


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.replace("`", "").strip().lower())
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """The anchors of a markdown page's headings."""
    return {github_slug(h) for h in HEADING.findall(_without_code(text))}


# --- the checks: each returns what is wrong, as lines naming the doc ---------------------------

def check_commands(name: str, text: str) -> list[str]:
    """`gpt1` subcommands, flags, presets and `set` assignments; `python -m` and `torchrun -m`
    modules; `make` targets; `dvc repro` stages."""
    problems = []
    for span in code_spans(text):
        for words in commands(span):
            tool, args = Path(words[0]).name, words[1:]
            if tool == "gpt1" and args and not args[0].startswith("-"):
                problems += _check_gpt1(name, args[0], args[1:])
            elif tool in PYTHONS | {"torchrun"} and "-m" in args:
                module = args[args.index("-m") + 1] if args.index("-m") + 1 < len(args) else ""
                if module and not _placeholder(module) and not _importable(module):
                    problems.append(f"{name}: `{span}`: no module {module!r}")
            elif tool == "make" and args and not args[0].startswith("-"):
                if args[0] not in make_targets():
                    problems.append(f"{name}: `{span}`: no make target {args[0]!r}")
            elif tool == "dvc" and args[:1] == ["repro"]:
                for target in (a for a in args[1:] if not a.startswith("-")):
                    problems += _check_stage(name, span, target)
    return problems


def _importable(module: str) -> bool:
    """Whether `module` is found. The top-level package is looked up on sys.path alone, past
    the meta-path finders: setuptools' distutils shim, asked for `pip` (docs name `python -m
    pip`), turns itself off for the rest of the process, and a later `import setuptools` (by
    torch.compile's C++ builds, in the same xdist worker) then fails."""
    top, _, rest = module.partition(".")
    if importlib.machinery.PathFinder.find_spec(top) is None:
        return False
    try:
        return not rest or importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package does not exist
        return False


def _check_gpt1(name: str, sub: str, args: list[str]) -> list[str]:
    where = f"{name}: `gpt1 {sub} {' '.join(args)}`".rstrip() + ":"
    if args and f"{sub} {args[0]}" in cli_commands():  # a command of a sub-group: `task add`
        sub, args = f"{sub} {args[0]}", args[1:]
    if sub not in cli_commands():
        return [f"{where} no subcommand {sub!r} (there are {sorted(cli_commands())})"]
    problems = [f"{where} no option {flag!r}" for flag in
                (a.split("=")[0] for a in args if a.startswith("--"))
                if flag not in cli_commands()[sub]]
    values = [a for a in args if not a.startswith("-") and not _placeholder(a)]
    if sub == "preset" and values and values[0] not in available():
        problems.append(f"{where} no preset {values[0]!r} (there are {available()})")
    if sub == "set" and values:
        problems += [f"{where} {err}" for err in _set_errors(values)]
    return problems


def _set_errors(assignments: list[str]) -> list[str]:
    """What `gpt1 set` says about `assignments` on a copy of params.yaml (nothing if it works)."""
    with tempfile.TemporaryDirectory(prefix="gpt1-docs-") as scratch:
        copy_ = Path(scratch) / "params.yaml"
        shutil.copyfile(REPO / "params.yaml", copy_)
        try:
            set_keys(copy_, parse_assignments(assignments))
        except ParamsError as err:
            return [str(err)]
    return []


def _check_stage(name: str, span: str, target: str) -> list[str]:
    group, at, key = target.partition("@")
    stages = dvc_stages()
    if _placeholder(group):
        return []
    if group not in stages:
        return [f"{name}: `{span}`: no stage {group!r} in dvc.yaml"]
    expands = stages[group]
    if at and (expands is None or (key not in expands and not _placeholder(key))):
        return [f"{name}: `{span}`: {target!r} is not a stage of dvc.yaml under params.yaml or "
                f"a preset (the {group} group has {sorted(expands or [])})"]
    return []


def check_params_keys(name: str, text: str) -> list[str]:
    """Every dotted key in backticks whose first part is a section of params.yaml exists."""
    problems = []
    for span in (m.group(1) for m in INLINE.finditer(FENCE.sub("", text))):
        match = DOTTED_KEY.fullmatch(span.strip())
        if not match:
            continue
        key = match.group(1)
        if key.split(".")[0] not in params() or key.rsplit(".", 1)[1] in FILE_SUFFIXES:
            continue
        try:
            _lookup(params(), key)
        except KeyError:
            problems.append(f"{name}: `{span}`: no params key {key!r} in params.yaml")
    return problems


def check_links(path: Path, text: str) -> list[str]:
    """Every relative link and image resolves to a file, and an anchor to a heading there."""
    problems = []
    for target in LINK.findall(_without_code(text)):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        if not file:  # a heading of this page
            if anchor not in anchors(text):
                problems.append(f"{path.name}: link {target!r}: no heading #{anchor} here")
            continue
        dest = (path.parent / file).resolve()
        if not dest.exists():
            problems.append(f"{path.name}: link {target!r}: {file} not found")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text("utf-8")):
            problems.append(f"{path.name}: link {target!r}: no heading #{anchor} in {dest.name}")
    return problems


def check_dag(name: str, text: str) -> list[str]:
    """The DAG diagram (the fenced block drawn with ─►) names every stage group of dvc.yaml."""
    diagrams = [b for b in FENCE.findall(text) if "─►" in b]
    if not diagrams:
        return [f"{name}: no DAG diagram (a fenced block drawn with ─►)"]
    return [f"{name}: the DAG diagram lacks stage group {group!r}"
            for diagram in diagrams for group in dvc_stages()
            if not re.search(rf"(?<![\w@-]){re.escape(group)}(?![\w])", diagram)]


# --- the tests ----------------------------------------------------------------------------------

@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_documented_commands_exist(doc: Path) -> None:
    assert check_commands(doc.name, doc.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_documented_params_keys_exist(doc: Path) -> None:
    assert check_params_keys(doc.name, doc.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_relative_links_resolve(doc: Path) -> None:
    assert check_links(doc, doc.read_text(encoding="utf-8")) == []


def test_readme_dag_names_every_stage_group() -> None:
    assert check_dag("README.md", README.read_text(encoding="utf-8")) == []
    for doc in DOCS[1:]:  # any other page that draws it draws all of it
        text = doc.read_text(encoding="utf-8")
        if "─►" in text:
            assert check_dag(doc.name, text) == []


def test_readme_is_a_landing_page() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines"
    for doc in DOCS[1:]:
        assert f"(docs/{doc.name})" in README.read_text(encoding="utf-8"), \
            f"the README's docs index does not link docs/{doc.name}"


def test_the_readme_shows_the_measured_quick_starts_headline() -> None:
    """The headline the README shows is the one the latest measured quick start printed
    (`python -m bench.quickstart`), not figures typed in once and left to go stale."""
    measured = json.loads((REPO / "bench" / "results" / "quickstart.json").read_text())
    (table,) = measured["tables"]
    headline = [line for line in table["notes"][1:] if line.strip()]
    shown = README.read_text(encoding="utf-8").split("```text\n", 1)[1].split("```")[0]
    assert shown.splitlines()[:len(headline)] == headline


def test_benchmarks_page_is_what_the_results_give() -> None:
    page = REPO / "docs" / "benchmarks.md"
    assert page.read_text(encoding="utf-8") == pages.render(), \
        "docs/benchmarks.md is stale: run python -m bench.pages"


def test_benchmarks_page_shows_each_result_with_machine_commit_and_date(tmp_path: Path) -> None:
    result = {"benchmark": "loader", "commit": "0123456789abcdef", "dirty": True,
              "date": "2030-01-02", "settings": {"repeats": 5, "out": "/x", "sizes": {"n": 2}},
              "machine": {"python": "3.11", "torch": "2", "cpu": "x86_64",
                          "cpu_capability": "AVX2", "threads": 2},
              "tables": [{"name": "t", "columns": ["a", "ratio"],
                          "rows": [{"a": "x|y", "ratio": 8017.25}, {"a": "z", "ratio": 1.234}],
                          "notes": ["a note"]}]}
    (tmp_path / "loader.json").write_text(json.dumps(result))
    page = pages.render(tmp_path)
    assert "`0123456` with uncommitted changes" in page and "2030-01-02" in page
    assert "machine: CPU x86_64 with AVX2 kernels, 2 torch threads" in page
    assert "settings: repeats 5, sizes.n 2" in page  # `out` is where it wrote, not a setting
    assert "| a | ratio |\n|---|---:|\n| x\\|y | 8,017 |\n| z | 1.23 |" in page
    assert "- a note" in page


BOGUS = """
Run `gpt1 frobnicate`, `gpt1 generate --prompt x --colour red`, `gpt1 preset huge`,
`python -m gpt1.nowhere`, `make everything`, `dvc repro polish`, `dvc repro finetune@nosuch`,
`dvc repro ablation@full-nosuch` and set `pretrain.max_step` and `model.safetensors`.

```bash
gpt1 set pretrain.nosuch=1 && torchrun --nproc_per_node=2 -m tasks.nosuch
```

See [nowhere](nowhere.md), [a section](pipeline.md#no-such-section) and [here](#nor-this).

```
ingest ─► clean ─► report
```
"""


def test_the_checks_catch_what_does_not_exist() -> None:
    """Each check finds its kind of bogus reference (and only those: `model.safetensors` is a
    file, not a params key)."""
    found = "\n".join(check_commands("bogus.md", BOGUS))
    for wrong in ("no subcommand 'frobnicate'", "no option '--colour'", "no preset 'huge'",
                  "no module 'gpt1.nowhere'", "no make target 'everything'",
                  "no stage 'polish'", "'finetune@nosuch' is not a stage",
                  "'ablation@full-nosuch' is not a stage", "pretrain.nosuch does not exist",
                  "no module 'tasks.nosuch'"):
        assert wrong in found, wrong
    assert len(found.splitlines()) == 10, found
    assert check_params_keys("bogus.md", BOGUS) == [
        "bogus.md: `pretrain.max_step`: no params key 'pretrain.max_step' in params.yaml"]
    links = "\n".join(check_links(REPO / "docs" / "bogus.md", BOGUS))
    assert "nowhere.md not found" in links and "no heading #no-such-section" in links
    assert "no heading #nor-this" in links
    missing = check_dag("bogus.md", BOGUS)
    assert "bogus.md: the DAG diagram lacks stage group 'pretrain'" in missing
    assert not any("'ingest'" in m or "'report'" in m for m in missing)


def test_the_checks_accept_what_exists() -> None:
    good = """
`gpt1 generate --model m --prompt p --top-k 5`, `gpt1 preset tiny`, `gpt1 set <key>=<value>`,
`python -m flows.finetune sst2 --force`, `make test`, `dvc repro -s -f finetune@sst2`,
`dvc repro ablation@no_pretrain-sst2`, `pretrain.compile: true`, `tasks.sst2.overrides`.

```bash
PREFECT_API_URL=http://x gpt1 set ingest.root=../shared/data 'finetune.seeds=[1, 2]'  # a comment
X=$(gpt1 team db url --dir d) torchrun --nnodes=2 -m tasks.pretrain
```
[pipeline](pipeline.md#presets)
"""
    assert check_commands("good.md", good) == []
    assert check_params_keys("good.md", good) == []
    assert check_links(REPO / "docs" / "good.md", good) == []


# --- docs/your-data.md, run --------------------------------------------------------------------

YOUR_DATA = REPO / "docs" / "your-data.md"
RUN_BLOCK = re.compile(r"^```(bash|python)\n(.*?)^```", re.M | re.S)


@pytest.mark.e2e
@pytest.mark.long
def test_your_data_walkthrough_runs_as_written(tmp_path: Path) -> None:
    """Every bash and python block of docs/your-data.md, in order, in a fresh copy of the
    repository (the tiny preset, the analyses cut to SST-2) on the files the page describes,
    written here as tools write them: two tasks declared with one command each, fine-tuned,
    their new file scored by the stage and by `gpt1 predict`, listed in the report beside their
    majority class, and the classifier exported and used through transformers' pipeline."""
    repo = copy_repo(tmp_path / "repo")
    run([sys.executable, "-m", "gpt1.cli", "preset", "tiny"], repo)
    only_sst2(repo)
    write_example(repo / "mydata")
    blocks = RUN_BLOCK.findall(YOUR_DATA.read_text(encoding="utf-8"))
    assert [kind for kind, _ in blocks] == ["bash"] * 5 + ["python"]
    printed = ""
    for kind, body in blocks:
        cmd = (["bash", "-euo", "pipefail", "-c", body] if kind == "bash"
               else [sys.executable, "-c", body])
        printed = run(cmd, repo, timeout=1200).stdout

    params = read_yaml((repo / "params.yaml").read_text(encoding="utf-8"))
    assert params["finetune"]["tasks"] == ["sst2", "reviews", "pairs"]
    assert params["tasks"]["pairs"]["table"]["split_values"] == {
        "train": "TRAIN", "dev": "TRIAL", "test": "TEST"}
    for task, dev_rows in (("reviews", 80), ("pairs", 90)):
        metrics = json.loads((repo / "metrics" / "finetune" / f"{task}.json").read_text())
        assert metrics["run"] and metrics["eval_examples"] == {"dev": dev_rows}
        assert {"accuracy", "majority_accuracy"} <= metrics.keys()
    staged = pq.read_table(repo / "predictions" / "reviews.parquet")
    assert staged.column_names[:2] == ["id", "review"]
    assert staged.column("id").to_pylist() == [str(i) for i in range(30)]
    assert set(staged.column("prediction").to_pylist()) <= {"negative", "positive"}
    with (repo / "scored" / "reviews.csv").open(encoding="utf-8", newline="") as fh:
        by_hand = list(csv.DictReader(fh))
    assert [row["prediction"] for row in by_hand] == staged.column("prediction").to_pylist()
    # pairs names no file to score: no predict@pairs stage, so no table
    assert dag.resolve(load_params(repo / "params.yaml"), repo).predict == ["reviews"]
    assert not (repo / "predictions" / "pairs.parquet").exists()
    summary = (repo / "reports" / "summary.md").read_text(encoding="utf-8")
    for title in ("reviews", "pairs"):  # task, metric, median, range, seeds, majority, paper
        row = next(line for line in summary.splitlines() if line.startswith(f"| {title} |"))
        cells = [cell.strip() for cell in row.strip().strip("|").split("|")]
        assert cells[1] == "accuracy" and float(cells[5]) > 0 and cells[6] == "", row
    label = ast.literal_eval(printed.strip())[0]["label"]  # the python block's print
    assert label in ("negative", "positive")


# --- docs/experiments.md, run -------------------------------------------------------------------

EXPERIMENTS = REPO / "docs" / "experiments.md"
GIT_IDENTITY = {"GIT_AUTHOR_NAME": "gpt1 tests", "GIT_AUTHOR_EMAIL": "test@gpt1.local",
                "GIT_COMMITTER_NAME": "gpt1 tests", "GIT_COMMITTER_EMAIL": "test@gpt1.local"}


def _experiments(repo: Path) -> dict[str, dict]:
    """The baseline commit's experiments, by name: their params.yaml and finetune metrics of
    SST-2, as `dvc exp show --json` gives them."""
    shown = json.loads(dvc("exp", "show", "--json", cwd=repo).stdout)
    baseline = next(commit for commit in shown if commit["rev"] != "workspace")
    return {rev["name"]: {
        "overrides": rev["data"]["params"]["params.yaml"]["data"]["tasks"]["sst2"]["overrides"],
        "metrics": rev["data"]["metrics"]["metrics/finetune/sst2.json"]["data"],
        "record": rev["data"]["metrics"]["metrics/stages/finetune/sst2.json"]["data"]}
        for exp in baseline.get("experiments") or [] for rev in exp["revs"]}


@pytest.mark.e2e
@pytest.mark.long
def test_the_experiments_page_runs_as_written(reproduced: Reproduced) -> None:
    """Every bash block of docs/experiments.md, in order, on the shared tiny pipeline: one
    named experiment, then a 2x2 grid queued by `gpt1 sweep` and run two at a time by DVC in
    its temporary workspaces. Each experiment's metrics come from a run with its own knobs
    (two at once lose nothing); the table and the figure show them all, the best marked;
    `dvc plots diff` draws their curves; the winner is applied and committed, the rest
    removed. Then DVC's run cache: a removed point run again is restored, not retrained."""
    repo = reproduced.repo
    blocks = RUN_BLOCK.findall(EXPERIMENTS.read_text(encoding="utf-8"))
    assert [kind for kind, _ in blocks] == ["bash"] * 5
    commit, one, grid, show, apply = (
        lambda body=body: run(["bash", "-euo", "pipefail", "-c", body], repo, env=GIT_IDENTITY,
                              timeout=1200) for _, body in blocks)
    commit()
    baseline_record = json.loads(
        (repo / "metrics" / "stages" / "finetune" / "sst2.json").read_text())
    one()
    swept = grid()
    assert "queued 4 experiments of finetune@sst2; run them: dvc exp run --run-all -j " \
        in swept.stdout
    assert "Failed" not in swept.stdout + swept.stderr, swept.stdout + swept.stderr

    experiments = _experiments(repo)
    assert len(experiments) == 5, sorted(experiments)
    for name, exp in experiments.items():  # each ran with its own knobs, alone or two at once
        assert {**exp["metrics"]["knobs"], **exp["overrides"]} == exp["metrics"]["knobs"], name
        assert exp["metrics"]["run"] and exp["metrics"]["accuracy"] >= 0, name
        # its stage record is its own run's, not the baseline's it started from
        assert exp["record"]["stage"] == "finetune@sst2", name
        assert exp["record"]["finished"] > baseline_record["finished"], name
    assert experiments["sst2-lr-small"]["overrides"] == {"lr": 0.0005}
    assert sorted((e["overrides"]["lr"], e["overrides"]["epochs"]) for n, e in
                  experiments.items() if n != "sst2-lr-small") == [
        (0.0005, 2), (0.0005, 3), (0.002, 2), (0.002, 3)]

    printed = show().stdout.splitlines()
    table = [line for line in printed if line.startswith("|")][:8]
    header = [cell.strip() for cell in table[0].strip("|").split("|")]
    assert header == ["experiment", "lr", "epochs", "accuracy (dev)", "seeds",
                      "majority class", "best"], table[0]
    rows = {cells[0]: cells for cells in ([cell.strip() for cell in line.strip("|").split("|")]
                                          for line in table[2:])}
    assert set(rows) == {"master", *experiments}
    for name, exp in experiments.items():
        assert float(rows[name][3]) == round(exp["metrics"]["accuracy"], 1), rows[name]
        assert rows[name][5] == f"{exp['metrics']['majority_accuracy']:.1f}", rows[name]
    top = max(float(cells[3]) for cells in rows.values())
    assert {n for n, cells in rows.items() if cells[-1] == "*"} == {
        n for n, cells in rows.items() if float(cells[3]) == top}  # ties: each
    assert (repo / "sweep-sst2.png").read_bytes()[:4] == b"\x89PNG"
    page = (repo / "dvc_plots" / "index.html").read_text(encoding="utf-8")
    assert all(name in page for name in experiments)  # each run's curve, on one page

    winner = experiments["sst2-lr-small"]["metrics"]
    apply()
    params = read_yaml((repo / "params.yaml").read_text(encoding="utf-8"))
    assert params["tasks"]["sst2"]["overrides"] == {"lr": 0.0005}
    applied = json.loads((repo / "metrics" / "finetune" / "sst2.json").read_text())
    assert applied["accuracy"] == winner["accuracy"] and applied["knobs"] == winner["knobs"]
    assert run(["git", "log", "-1", "--format=%s"], repo).stdout.strip() == "sst2: lr 0.0005"
    assert run(["git", "status", "--porcelain", "--untracked-files=no"], repo).stdout == ""
    assert dvc("exp", "list", "--name-only", cwd=repo).stdout.strip() == ""
    assert "up to date" in dvc("status", "finetune@sst2", cwd=repo).stdout

    # a point of the removed sweep, run again: restored from DVC's run cache, not retrained
    point = next(e for n, e in experiments.items() if e["overrides"] == {"lr": 0.002,
                                                                          "epochs": 2})
    again = dvc("exp", "run", "-S", "++tasks.sst2.overrides.lr=0.002",
                "-S", "++tasks.sst2.overrides.epochs=2", "finetune@sst2", cwd=repo)
    assert "Stage 'finetune@sst2' is cached - skipping run" in again.stdout + again.stderr, \
        again.stdout
    rerun = json.loads((repo / "metrics" / "finetune" / "sst2.json").read_text())
    assert (rerun["accuracy"], rerun["knobs"]) == (point["metrics"]["accuracy"],
                                                   point["metrics"]["knobs"])
    record = json.loads((repo / "metrics" / "stages" / "finetune" / "sst2.json").read_text())
    assert record["finished"] == point["record"]["finished"]  # the grid's run, restored
