"""`python -m bench.dag`: the stage spans it reads from DVC's lines, the overheads and targets it
works out, the synthetic DAG it writes (a valid params.yaml whose DAG DVC resolves), and a real
`dvc repro`, no-op repro and status measured on a DAG of two trivial stages. Its --tiny run, the
repository's own DAG of 13 stages, takes over a minute on 2 cores: not run here."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bench import dag, pages
from bench.dag import (
    QUICKSTART,
    DagRun,
    Output,
    StageGap,
    dag_run,
    record_seconds,
    sizes_arg,
    skipped_stages,
    stage_gaps,
    stage_starts,
    targets,
)
from gpt1.config import load_params, read_yaml

# what `dvc repro` printed, each line with the seconds at which it was read
LINES = [
    (0.9, "Running stage 'ingest':"),
    (0.9, "> python -m tasks.ingest"),
    (1.5, "12:00:01 INFO tasks.stage stage ingest done in 0.4s"),
    (1.6, "Updating lock file 'dvc.lock'"),
    (1.7, ""),
    (2.1, "Stage 'clean' didn't change, skipping"),
    (2.4, "Running stage 'finetune@t00':"),
    (5.0, "12:00:05 INFO gpt1.jobs.finetune not a start: Running stage 'x':"),
    (6.8, "Running stage 'ablation@full-t00':"),
    (7.0, "Stage 'bpe' is cached - skipping run, checking out outputs"),
    (9.9, "Use `dvc push` to send your updates to remote storage."),
]


def test_the_stages_run_and_skipped_are_read_from_dvcs_lines() -> None:
    assert stage_starts(LINES) == [("ingest", 0.9), ("finetune@t00", 2.4),
                                   ("ablation@full-t00", 6.8)]
    assert skipped_stages(LINES) == ["clean", "bpe"]
    assert stage_starts([(0.0, "  Running stage 'report':  \r")]) == [("report", 0.0)]


def test_a_stages_overhead_is_its_span_less_its_own_seconds() -> None:
    gaps = stage_gaps(stage_starts(LINES), 10.5,
                      {"ingest": 0.4, "finetune@t00": 3.2, "ablation@full-t00": 2.5})
    assert [(g.stage, g.group) for g in gaps] == [("ingest", "single stages"),
                                                  ("finetune@t00", "finetune"),
                                                  ("ablation@full-t00", "ablation")]
    assert [g.span for g in gaps] == pytest.approx([1.5, 4.4, 3.7])
    assert [g.overhead for g in gaps] == pytest.approx([1.1, 1.2, 1.2])

    run = dag_run("synthetic, 1 tasks", 1, Output(0, 10.5, LINES),
                  {"ingest": 0.4, "finetune@t00": 3.2, "ablation@full-t00": 2.5})
    assert run.before_first == 0.9 and run.wall == 10.5 and run.skipped == ["clean", "bpe"]
    assert run.stage_sum == pytest.approx(6.1)
    assert run.overhead_median == pytest.approx(1.2)
    assert run.overhead_total == pytest.approx(3.5)
    assert run.overhead_per_stage == pytest.approx(3.5 / 3)


def test_a_stage_without_its_record_is_an_error_not_a_guess() -> None:
    with pytest.raises(ValueError, match=r"finetune@t00"):
        stage_gaps([("ingest", 0.0), ("finetune@t00", 1.0)], 2.0, {"ingest": 0.5})
    with pytest.raises(ValueError, match="ran no stage"):
        dag_run("x", 1, Output(0, 1.0, [(0.5, "Data and pipelines are up to date.")]), {})


def test_the_seconds_come_from_records_this_run_wrote(tmp_path: Path) -> None:
    since = datetime.datetime(2030, 1, 2, 3, 4, 5, 600000, tzinfo=datetime.UTC)

    def record(name: str, seconds: float, finished: str) -> Path:
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"stage": name, "seconds": seconds, "finished": finished}))
        return path

    paths = {"fresh": record("fresh", 2.5, "2030-01-02T03:04:09+00:00"),
             "same_second": record("same_second", 0.1, "2030-01-02T03:04:05+00:00"),
             "stale": record("stale", 9.0, "2030-01-02T03:04:04+00:00"),
             "absent": tmp_path / "absent.json"}
    assert record_seconds(paths, since) == {"fresh": 2.5, "same_second": 0.1}
    assert record_seconds(paths) == {"fresh": 2.5, "same_second": 0.1, "stale": 9.0}


def _run(name: str, tasks: int, overheads: list[float], noop: list[float] | None = None,
         status: list[float] | None = None) -> DagRun:
    gaps = [StageGap(f"s{i}", 1.0 + o, 1.0) for i, o in enumerate(overheads)]
    return DagRun(name, tasks, 0.0, 0.0, gaps, noop_repro=noop or [], status=status or [])


def test_the_targets_say_what_is_met() -> None:
    runs = [_run(QUICKSTART, 1, [0.5, 0.8, 2.0], noop=[2.5, 1.9, 1.0], status=[1.6, 1.4, 1.7]),
            _run("synthetic, 4 tasks", 4, [1.0, 1.0]),
            _run("synthetic, 48 tasks", 48, [1.0, 1.2, 3.0])]  # per stage 5.2 / 3 vs 1.0
    found = {(t.target, t.dag): (t.measured, t.limit, t.met) for t in targets(runs)}
    assert found == {
        ("median overhead per stage, s", QUICKSTART): (pytest.approx(0.8), 1.0, True),
        ("median overhead per stage, s", "synthetic, 4 tasks"): (pytest.approx(1.0), 1.0, True),
        ("median overhead per stage, s", "synthetic, 48 tasks"): (pytest.approx(1.2), 1.0, False),
        ("no-op dvc repro, s", QUICKSTART): (1.9, 2.0, True),
        ("dvc status, s", QUICKSTART): (1.6, 1.5, False),
        ("overhead per stage at 48 tasks / at 4", "synthetic, 48 tasks vs 4 tasks"):
            (pytest.approx(5.2 / 3), 1.5, False),
    }


def test_targets_not_measured_say_so() -> None:
    found = targets([_run("synthetic, 2 tasks", 2, [0.4])])
    assert [(t.target, t.measured, t.met) for t in found] == [
        ("median overhead per stage, s", pytest.approx(0.4), True),
        ("no-op dvc repro, s", None, None), ("dvc status, s", None, None),
        ("overhead per stage, largest size / smallest", None, None)]
    table = dag.targets_table(found)
    assert [row["met"] for row in table.rows] == [True, "not measured", "not measured",
                                                  "not measured"]


def test_a_run_on_a_busy_machine_says_so() -> None:
    busy, idle = _run("synthetic, 2 tasks", 2, [0.4]), _run("synthetic, 4 tasks", 4, [0.4])
    busy.wall, busy.others_cpu, idle.wall, idle.others_cpu = 100.0, 30.0, 100.0, 2.0
    table = dag.dag_table([busy, idle])
    assert [row["others_cpu_s"] for row in table.rows] == [30.0, 2.0]
    assert [n for n in table.notes if n.startswith("NOT IDLE")] == [
        "NOT IDLE: other processes used the CPU during synthetic, 2 tasks (30 CPU s in 100 s): "
        "these figures include their load"]


def test_the_machines_busy_time_is_read_from_proc_stat(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    # user nice system idle iowait irq softirq steal guest guest_nice, in clock ticks
    stat.write_text("cpu  1000 20 300 90000 500 7 3 10 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n")
    ticks = os.sysconf("SC_CLK_TCK")
    assert dag.busy_cpu_seconds(stat) == pytest.approx((1000 + 20 + 300 + 7 + 3 + 10) / ticks)
    assert dag.busy_cpu_seconds(tmp_path / "absent") is None


def test_sizes_are_whole_numbers_from_one() -> None:
    assert sizes_arg("4,16,48") == [4, 16, 48]
    assert sizes_arg("2") == [2]
    for bad in ("", "0,4", "four", "4,-1"):
        with pytest.raises(Exception, match="sizes"):
            sizes_arg(bad)


def test_the_synthetic_dag_is_a_valid_pipeline_of_n_tasks(tmp_path: Path) -> None:
    """The copy `main` measures: the working tree, its params rewritten to N copies of the
    sample's sst2 entry, dag.yaml written where dvc.yaml reads one, committed; DVC resolves it to
    one finetune stage per task and none of the shipped registry's."""
    root = dag.copy_tree(tmp_path / "copy")
    shipped = read_yaml((root / "params.yaml").read_text(encoding="utf-8"))["tasks"]["sst2"]
    assert dag.prepare(root, 3, tiny=False) == 3
    params = load_params(root / "params.yaml")
    names = ["t00", "t01", "t02"]
    assert list(params.tasks) == names and params.requested_tasks() == names
    assert all(params.tasks[n].files == shipped["files"] for n in names)
    assert params.ingest.max_train_examples == 64 and params.ingest.max_dev_examples == 32
    for analysis in (params.analysis.ablation, params.analysis.transfer,
                     params.analysis.zero_shot):
        assert list(analysis.tasks) == ["t00"]
    assert not (root / "dvc.lock").exists()
    committed = subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True,
                               text=True, check=True)
    assert committed.stdout == ""
    listed = subprocess.run([sys.executable, "-m", "dvc", "stage", "list", "--name-only"],
                            cwd=root, capture_output=True, text=True)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    stages = listed.stdout.split()
    assert [s for s in stages if s.startswith("finetune@")] == [f"finetune@{n}" for n in names]
    assert not any(s.endswith(("@sst2", "@cola", "-sst2")) for s in stages)
    if (root / "dag.yaml").is_file():
        assert read_yaml((root / "dag.yaml").read_text(encoding="utf-8"))["dag"]["finetune"] \
            == names


def test_the_tiny_synthetic_dag_pretrains_the_fewest_steps(tmp_path: Path) -> None:
    path = tmp_path / "params.yaml"
    path.write_text((dag.REPO / "params.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    assert dag.synthetic_params(path, 12, tiny=True) == [f"t{i:02d}" for i in range(12)]
    params = load_params(path)
    assert params.pretrain.max_steps == 4 and params.pretrain.snapshots == [0, 4]
    assert params.ingest.max_train_examples == 16


# a DAG of two stages that do next to nothing, each writing its record where the copy's
# `tasks.stage.record_path` says, as the pipeline's stages do
STAGE = """\
import datetime, json, sys, time
from pathlib import Path
from tasks.stage import record_path
started = time.perf_counter()
time.sleep(0.3)
name = sys.argv[1]
Path(f"out_{name}.txt").write_text(name)
path = record_path(name)
path.parent.mkdir(parents=True, exist_ok=True)
path.write_text(json.dumps({"stage": name, "seconds": round(time.perf_counter() - started, 1),
                            "finished": datetime.datetime.now(datetime.UTC).isoformat()}))
"""
DVC_YAML = """\
stages:
  first:
    cmd: python stage.py first
    deps: [stage.py]
    outs: [out_first.txt]
    metrics: [{metrics/stages/first.json: {cache: false}}]
  second:
    cmd: python stage.py second
    deps: [out_first.txt]
    outs: [out_second.txt]
    metrics: [{metrics/stages/second.json: {cache: false}}]
"""


def test_a_real_dvc_repro_is_measured(tmp_path: Path) -> None:
    root = tmp_path / "project"
    (root / "tasks").mkdir(parents=True)
    (root / "tasks" / "__init__.py").write_text("")
    (root / "tasks" / "stage.py").write_text(textwrap.dedent("""\
        from pathlib import Path
        def record_path(address):
            return Path("metrics/stages") / f"{address}.json"
        """))
    (root / "stage.py").write_text(STAGE)
    (root / "dvc.yaml").write_text(DVC_YAML)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run([*dag.dvc_command("init", "-q")], cwd=root, check=True, env=dag.dvc_env())
    dag.commit_copy(root)

    run = dag.measure("two stages", root, 2, repeats=2)
    assert [g.stage for g in run.gaps] == ["first", "second"]
    assert [g.seconds for g in run.gaps] == [0.3, 0.3]
    # each span holds its stage's process (an interpreter's start, the sleep) and DVC's work
    assert all(g.span > g.seconds and g.overhead > 0 for g in run.gaps)
    assert run.wall >= run.before_first + sum(g.span for g in run.gaps) - 1e-6
    assert len(run.noop_repro) == 2 and len(run.status) == 2
    assert all(s > 0 for s in run.noop_repro + run.status)
    assert run.others_cpu is not None and run.others_cpu >= 0
    lock = (root / "dvc.lock").read_bytes()
    assert (run.lock_lines, run.lock_bytes) == (lock.count(b"\n"), len(lock))
    assert b"second:" in lock


def test_main_publishes_the_tables_that_bench_pages_renders(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`main`'s loop, the copies and runs replaced by fixed figures: the JSON it writes after
    each DAG, and the section `python -m bench.pages` makes of it."""
    figures = {None: [0.5, 0.9, 1.1], 4: [1.0, 1.0], 48: [1.0, 2.0, 2.0]}
    prepared: list[int | None] = []

    def prepare(root: Path, n_tasks: int | None, tiny: bool) -> int:
        assert (root / "params.yaml").is_file() and (root / "dvc.yaml").is_file()
        prepared.append(n_tasks)
        return 12 if n_tasks is None else n_tasks

    def measure(name: str, root: Path, tasks: int, repeats: int) -> DagRun:
        run = _run(name, tasks, figures[None if name == QUICKSTART else tasks],
                   noop=[1.5] * repeats, status=[1.0] * repeats)
        run.lock_lines, run.lock_bytes = 10 * tasks, 300 * tasks
        return run

    monkeypatch.setattr(dag, "prepare", prepare)
    monkeypatch.setattr(dag, "measure", measure)
    path = dag.main(["--sizes", "4,48", "--out", str(tmp_path)])
    assert prepared == [None, 4, 48]
    result = json.loads(path.read_text())
    assert path == tmp_path / "dag.json" and result["benchmark"] == "dag"
    assert result["settings"]["repeats"] == 3 and result["settings"]["sizes"] == [4, 48]
    overview, groups, goals = result["tables"]
    assert [(r["dag"], r["tasks"], r["stages_run"], r["noop_repro_s"], r["lock_lines"])
            for r in overview["rows"]] == [(QUICKSTART, 12, 3, 1.5, 120),
                                           ("synthetic, 4 tasks", 4, 2, 1.5, 40),
                                           ("synthetic, 48 tasks", 48, 3, 1.5, 480)]
    assert [r["count"] for r in groups["rows"]] == [3, 2, 3]
    assert [r["met"] for r in goals["rows"]] == [True, True, False, True, True, False]
    assert result["settings"]["per_stage"]["synthetic, 4 tasks"] == [["s0", 2.0, 1.0],
                                                                      ["s1", 2.0, 1.0]]

    page = pages.render(tmp_path)
    assert "## dag" in page and "`python -m bench.dag`" in page
    assert "### targets (issue 52)" in page
    assert "| synthetic, 48 tasks | 48 | 3 |" in page
