"""The DAG's own cost (issue 52): what `dvc repro` spends around the stages' own work, on the
quick start's DAG and on synthetic DAGs of 4, 16 and 48 registry tasks, then what a no-op
`dvc repro` and `dvc status` take and how large dvc.lock grows.

Each DAG runs in a fresh copy of this checkout's working tree (tracked files and untracked ones
git does not ignore, so uncommitted changes count; `git init` and a commit there, which the
stages read; no DVC cache). The quick start's is params.yaml as shipped (the bundled sample);
a synthetic one is the `tiny` preset on one book, its task registry N copies of the sample's
`sst2` entry (`t00`, `t01`, ...) on 64 rows, all fine-tuned, one analysis cell of each kind on
`t00`, and no dvc.lock (the shipped one describes the shipped DAG). Where the copy has a
`dag.yaml`, or its dvc.yaml loads one, `gpt1 dag` writes it anew from params.yaml. The working
tree is copied once, at the start: every DAG runs the same code.

DVC's merged output is read line by line as it comes. A stage's overhead is the time from DVC's
`Running stage 'X':` to the next stage's (the last one's: to the end of `dvc repro`) less the
seconds its stage record gives (where the copy's `tasks.stage.record_path` puts it; timed
inside the stage's process, and written by this run):
DVC's checks and hashing before and after it, the interpreter's start and imports, the lock
file's update. Targets: a median overhead of at most 1 s; on the quick start's DAG a no-op
`dvc repro` within 2 s and `dvc status` within 1.5 s; the overhead per stage at the largest
synthetic size at most 1.5x that at the smallest.

    python -m bench.dag                      # about 20 minutes on 2 cores
    python -m bench.dag --sizes 4 --skip-quickstart
    python -m bench.dag --tiny --repeats 1   # a smoke run: 2 tasks, fewest steps
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.common import REPO, Table, median, parser, provenance, publish
from gpt1.config import read_yaml
from gpt1.presets.edit import apply_preset, set_keys

# what DVC prints as it starts a stage's command, and for one it does not run
RUNNING = re.compile(r"^Running stage '(?P<stage>[^']+)':$")
SKIPPED = re.compile(r"^Stage '(?P<stage>[^']+)' (?:didn't change, skipping|is cached)")
SIZES = (4, 16, 48)
TINY_SIZE = 2
# the targets of issue 52
MEDIAN_OVERHEAD_S = 1.0
NOOP_REPRO_S = 2.0
STATUS_S = 1.5
GROWTH = 1.5
BUSY_SHARE = 0.1  # others' CPU seconds per wall second above which a run says it was not idle
QUICKSTART = "quick start"
DAG_FILE = "dag.yaml"  # the per-task stages' lists, where dvc.yaml loads them (`gpt1 dag`)
GIT = ["git", "-c", "user.email=bench@gpt1.local", "-c", "user.name=gpt1 bench"]


@dataclass(frozen=True)
class Output:
    """One command run: its exit status, wall seconds, and each line of its merged stdout and
    stderr with the seconds since the start at which it was read."""

    returncode: int
    seconds: float
    lines: list[tuple[float, str]]

    @property
    def text(self) -> str:
        return "".join(f"{line}\n" for _, line in self.lines)


def run_lines(command: Sequence[str], cwd: Path, env: Mapping[str, str],
              echo: bool = True) -> Output:
    """Run `command` in `cwd`, stamping each line of its output as it arrives (and echoing it)."""
    started = time.perf_counter()
    proc = subprocess.Popen(list(command), cwd=cwd, env=dict(env), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append((time.perf_counter() - started, line.rstrip("\r\n")))
        if echo:
            print(line, end="", flush=True)
    returncode = proc.wait()
    return Output(returncode, time.perf_counter() - started, lines)


def stage_starts(lines: Iterable[tuple[float, str]]) -> list[tuple[str, float]]:
    """Each stage DVC ran, in order, with the time its `Running stage` line was read."""
    return [(m.group("stage"), t) for t, line in lines if (m := RUNNING.match(line.strip()))]


def skipped_stages(lines: Iterable[tuple[float, str]]) -> list[str]:
    """The stages DVC found up to date (or restored from its run cache) and did not run."""
    return [m.group("stage") for _, line in lines if (m := SKIPPED.match(line.strip()))]


def busy_cpu_seconds(stat: Path = Path("/proc/stat")) -> float | None:
    """CPU seconds the whole machine has spent busy since boot (all but idle and I/O wait, over
    every core), from Linux's /proc/stat; None elsewhere."""
    try:
        fields = stat.read_text().splitlines()[0].split()
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def children_cpu_seconds() -> float:
    """User and system CPU seconds of this process's finished children (and theirs, waited)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@dataclass(frozen=True)
class StageGap:
    """One stage run by `dvc repro`: from its `Running stage` line to the next (`span`), and the
    seconds its own process timed (`seconds`, its stage record)."""

    stage: str
    span: float
    seconds: float

    @property
    def overhead(self) -> float:
        return self.span - self.seconds

    @property
    def group(self) -> str:
        """`finetune` for `finetune@sst2`; a stage of its own: `single stages`."""
        name, at, _ = self.stage.partition("@")
        return name if at else "single stages"


def stage_gaps(starts: Sequence[tuple[str, float]], end: float,
               seconds: Mapping[str, float]) -> list[StageGap]:
    """Each started stage's span (to the next start; the last one's to `end`) beside its own
    `seconds`. A stage without seconds (no record) is an error: its overhead is unknown."""
    missing = [stage for stage, _ in starts if stage not in seconds]
    if missing:
        raise ValueError(f"no stage record (seconds) for {missing}")
    bounds = [t for _, t in starts[1:]] + [end]
    return [StageGap(stage, stop - start, seconds[stage])
            for (stage, start), stop in zip(starts, bounds, strict=True)]


def record_paths(root: Path, stages: Sequence[str]) -> dict[str, Path]:
    """Where each stage's record lies in the copy at `root`, as the copy's own code places it
    (`tasks.stage.record_path`, run there: the code measured, not this checkout's as it is now)."""
    code = ("import json, sys; from tasks.stage import record_path; "
            "print(json.dumps({s: str(record_path(s)) for s in sys.argv[1:]}))")
    done = subprocess.run([sys.executable, "-c", code, *stages], cwd=root, capture_output=True,
                          text=True, check=True)
    return {stage: root / path for stage, path in json.loads(done.stdout).items()}


def record_seconds(paths: Mapping[str, Path],
                   since: datetime.datetime | None = None) -> dict[str, float]:
    """The `seconds` of each stage's record at `paths` (a stage record: `seconds`, `finished`,
    ...). A stage without a record file is left out, and so is one whose record finished before
    `since` (a whole second earlier: records keep whole seconds): not written by this run."""
    found = {}
    for stage, path in paths.items():
        if not path.is_file():
            continue
        record = json.loads(path.read_text(encoding="utf-8"))
        finished = datetime.datetime.fromisoformat(record["finished"])
        if since is None or finished >= since.replace(microsecond=0):
            found[stage] = float(record["seconds"])
    return found


@dataclass
class DagRun:
    """One DAG's full `dvc repro` (its output's stage spans) and what came after it."""

    name: str
    tasks: int  # registry tasks
    wall: float
    before_first: float  # from the start of `dvc repro` to its first `Running stage`
    gaps: list[StageGap]
    skipped: list[str] = field(default_factory=list)
    noop_repro: list[float] = field(default_factory=list)
    status: list[float] = field(default_factory=list)
    lock_lines: int = 0
    lock_bytes: int = 0
    # CPU seconds the rest of the machine used while dvc repro ran (busy CPU time less dvc's
    # and its stages'): other load that the figures then include. None: not measured
    others_cpu: float | None = None

    @property
    def stage_sum(self) -> float:
        return sum(g.seconds for g in self.gaps)

    @property
    def overheads(self) -> list[float]:
        return [g.overhead for g in self.gaps]

    @property
    def overhead_median(self) -> float:
        return median(self.overheads)

    @property
    def overhead_total(self) -> float:
        return sum(self.overheads)

    @property
    def overhead_per_stage(self) -> float:
        return self.overhead_total / len(self.gaps)


def dag_run(name: str, tasks: int, output: Output, seconds: Mapping[str, float]) -> DagRun:
    """The figures of a full `dvc repro`'s `output`, the stages' own `seconds` beside it."""
    starts = stage_starts(output.lines)
    if not starts:
        raise ValueError(f"{name}: dvc repro ran no stage")
    return DagRun(name, tasks, output.seconds, starts[0][1],
                  stage_gaps(starts, output.seconds, seconds), skipped_stages(output.lines))


@dataclass(frozen=True)
class Target:
    target: str
    dag: str
    measured: float | None
    limit: float
    met: bool | None  # None: not measured in this run


def targets(runs: Sequence[DagRun]) -> list[Target]:
    """Issue 52's targets over `runs`: each DAG's median overhead; the quick start's no-op
    repro and status (where it ran); the per-stage overhead of the largest synthetic DAG
    against the smallest's (where two sizes ran)."""
    found = [Target("median overhead per stage, s", run.name, run.overhead_median,
                    MEDIAN_OVERHEAD_S, run.overhead_median <= MEDIAN_OVERHEAD_S) for run in runs]
    quick = next((run for run in runs if run.name == QUICKSTART), None)
    for label, values, limit in (("no-op dvc repro, s", quick and quick.noop_repro, NOOP_REPRO_S),
                                 ("dvc status, s", quick and quick.status, STATUS_S)):
        value = median(values) if values else None
        found.append(Target(label, QUICKSTART, value, limit,
                            None if value is None else value <= limit))
    synthetic = sorted((run for run in runs if run.name != QUICKSTART), key=lambda r: r.tasks)
    if len(synthetic) >= 2:
        small, large = synthetic[0], synthetic[-1]
        ratio = large.overhead_per_stage / small.overhead_per_stage
        found.append(Target(f"overhead per stage at {large.tasks} tasks / at {small.tasks}",
                            f"{large.name} vs {small.tasks} tasks", ratio, GROWTH,
                            ratio <= GROWTH))
    else:
        found.append(Target("overhead per stage, largest size / smallest", "synthetic", None,
                            GROWTH, None))
    return found


def dag_table(runs: Sequence[DagRun]) -> Table:
    table = Table("dvc repro of each DAG: wall, the stages' own seconds, the overhead between",
                  ["dag", "tasks", "stages_run", "wall_s", "stage_sum_s", "overhead_median_s",
                   "overhead_total_s", "overhead_per_stage_s", "before_first_s",
                   "noop_repro_s", "status_s", "lock_lines", "lock_bytes", "others_cpu_s"])
    for run in runs:
        table.add(dag=run.name, tasks=run.tasks, stages_run=len(run.gaps), wall_s=run.wall,
                  stage_sum_s=run.stage_sum, overhead_median_s=run.overhead_median,
                  overhead_total_s=run.overhead_total,
                  overhead_per_stage_s=run.overhead_per_stage, before_first_s=run.before_first,
                  noop_repro_s=median(run.noop_repro) if run.noop_repro else None,
                  status_s=median(run.status) if run.status else None,
                  lock_lines=run.lock_lines, lock_bytes=run.lock_bytes,
                  others_cpu_s=run.others_cpu)
    skipped = [f"{run.name}: {len(run.skipped)}" for run in runs if run.skipped]
    busy = [f"{run.name} ({run.others_cpu:.0f} CPU s in {run.wall:.0f} s)" for run in runs
            if run.others_cpu is not None and run.others_cpu > BUSY_SHARE * run.wall]
    table.notes += [
        "tasks: the task registry's (params tasks); stages_run: the `Running stage` lines",
        "overhead: from DVC's `Running stage` line to the next stage's (the last one's: to the "
        "end of dvc repro) less the stage's own seconds (its stage record, timed inside its "
        "process, rounded to 0.1 s); before_first: dvc repro's start to its first stage",
        "noop_repro_s, status_s: median of the repetitions after the full run, nothing to do",
        "others_cpu_s: CPU seconds the rest of the machine used during the full dvc repro (the "
        "machine's busy time less dvc's and its stages'; the stages' detached params watchers "
        "count as others): near 0 on an idle machine",
        *([f"stages DVC skipped (up to date or cached): {', '.join(skipped)}"] if skipped
          else []),
        *([f"NOT IDLE: other processes used the CPU during {', '.join(busy)}: these figures "
           "include their load"] if busy else []),
    ]
    return table


def group_table(runs: Sequence[DagRun]) -> Table:
    """The overhead of each DAG's stages by kind: the stages of their own, each foreach/matrix
    group."""
    table = Table("overhead by kind of stage", ["dag", "kind", "count", "stage_median_s",
                                                "overhead_median_s", "overhead_total_s"])
    for run in runs:
        groups: dict[str, list[StageGap]] = {}
        for gap in run.gaps:
            groups.setdefault(gap.group, []).append(gap)
        for name, gaps in groups.items():
            table.add(dag=run.name, kind=name, count=len(gaps),
                      stage_median_s=median([g.seconds for g in gaps]),
                      overhead_median_s=median([g.overhead for g in gaps]),
                      overhead_total_s=sum(g.overhead for g in gaps))
    return table


def targets_table(found: Sequence[Target]) -> Table:
    table = Table("targets (issue 52)", ["target", "dag", "measured", "limit", "met"])
    for t in found:
        table.add(target=t.target, dag=t.dag, measured=t.measured, limit=t.limit,
                  met="not measured" if t.met is None else t.met)
    return table


# --- the copies and their params ---

def copy_tree(dest: Path, repo: Path = REPO) -> Path:
    """This checkout's working tree (tracked files and untracked ones git does not ignore, as
    they are now) and `.dvc/config`, in `dest`: no DVC cache, no outputs."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=repo,
                            capture_output=True, text=True, check=True).stdout.split("\0")
    for rel in {*filter(None, listed), ".dvc/config"}:
        src = repo / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


def commit_copy(root: Path) -> None:
    """A git repository of `root` as it is, its files committed: the stages record the commit."""
    for cmd in (["git", "init", "-q"], [*GIT, "add", "-A"], [*GIT, "commit", "-qm", "copy"]):
        subprocess.run(cmd, cwd=root, check=True, capture_output=True)


def task_names(n: int) -> list[str]:
    width = max(2, len(str(n - 1)))
    return [f"t{i:0{width}d}" for i in range(n)]


def synthetic_params(path: Path, n_tasks: int, tiny: bool = False) -> list[str]:
    """Rewrite params file `path` (as shipped) into the synthetic DAG of `n_tasks` registry
    tasks: the `tiny` preset on one book, every task a copy of the sample's `sst2` entry on a
    few rows, all fine-tuned, one cell of each analysis on the first; with `tiny`, the fewest
    pretraining steps. The task names, in order."""
    apply_preset("tiny", path)
    sst2 = read_yaml(path.read_text(encoding="utf-8"))["tasks"]["sst2"]
    names = task_names(n_tasks)
    rows = 16 if tiny else 64
    first = names[0]
    keys: dict[str, object] = {
        "ingest.corpus": ["corpus/01_*.txt"],
        "ingest.max_train_examples": rows,
        "ingest.max_dev_examples": rows // 2,
        "ingest.max_test_examples": rows // 2,
        "lm_eval.files": [],
        "tasks": {name: sst2 for name in names},
        "finetune.tasks": names,
        "finetune.seeds": [1234],
        "analysis.seeds": [1],
        "analysis.max_dev_examples": rows // 2,
        "analysis.ablation.variants": ["full"],
        "analysis.ablation.tasks": {first: [rows // 2]},
        "analysis.transfer.tasks": {first: rows // 2},
        "analysis.zero_shot.tasks": {first: "sentiment"},
        "analysis.zero_shot.max_examples": rows // 2,
    }
    if tiny:
        keys.update({"pretrain.max_steps": 4, "pretrain.warmup_steps": 1,
                     "pretrain.eval_every": 2, "pretrain.log_every": 2,
                     "pretrain.checkpoint_every": 4, "pretrain.snapshots": [0, 4]})
    set_keys(path, keys)
    return names


def dvc_command(*args: str) -> list[str]:
    """`dvc` of this interpreter's environment (what the Makefile runs)."""
    script = Path(sys.executable).parent / "dvc"
    return [str(script), *args] if script.is_file() else [sys.executable, "-m", "dvc", *args]


def dvc_env() -> dict[str, str]:
    """dvc.yaml's commands run `python`: this interpreter's, first on PATH; output unbuffered,
    so that each line is stamped when it is printed."""
    bin_dir = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": os.pathsep.join([bin_dir, os.environ.get("PATH", "")]),
            "PYTHONUNBUFFERED": "1"}


def measure(name: str, root: Path, n_tasks: int, repeats: int) -> DagRun:
    """The full `dvc repro` of the copy at `root`, then `repeats` no-op repros and statuses."""
    env = dvc_env()
    print(f"\n=== {name}: dvc repro in {root}", flush=True)
    started = datetime.datetime.now(datetime.UTC)
    busy, ours = busy_cpu_seconds(), children_cpu_seconds()
    full = run_lines(dvc_command("repro"), root, env)
    busy_after, ours_after = busy_cpu_seconds(), children_cpu_seconds()
    if full.returncode:
        raise RuntimeError(f"{name}: dvc repro exited {full.returncode}:\n"
                           f"{full.text[-4000:]}")
    starts = stage_starts(full.lines)
    seconds = record_seconds(record_paths(root, [stage for stage, _ in starts]), started)
    run = dag_run(name, n_tasks, full, seconds)
    if busy is not None and busy_after is not None:
        run.others_cpu = max(0.0, (busy_after - busy) - (ours_after - ours))
    for _ in range(repeats):
        noop = run_lines(dvc_command("repro"), root, env, echo=False)
        again = stage_starts(noop.lines)
        if noop.returncode or again:
            raise RuntimeError(f"{name}: the no-op dvc repro exited {noop.returncode} and ran "
                               f"{[s for s, _ in again]}:\n{noop.text[-4000:]}")
        run.noop_repro.append(noop.seconds)
        status = run_lines(dvc_command("status"), root, env, echo=False)
        if status.returncode or "up to date" not in status.text:
            raise RuntimeError(f"{name}: dvc status after the full run, exit "
                               f"{status.returncode}:\n{status.text[-4000:]}")
        run.status.append(status.seconds)
    lock = (root / "dvc.lock").read_bytes()
    run.lock_lines, run.lock_bytes = lock.count(b"\n"), len(lock)
    return run


def reads_dag_file(root: Path) -> bool:
    """Whether the copy at `root` has a `dag.yaml`, or its dvc.yaml loads one (`vars`): the
    per-task stages' lists that `gpt1 dag` resolves from params.yaml."""
    if (root / DAG_FILE).is_file():
        return True
    dvc_yaml = read_yaml((root / "dvc.yaml").read_text(encoding="utf-8"))
    listed = dvc_yaml.get("vars") if isinstance(dvc_yaml, dict) else None
    return any(entry == DAG_FILE for entry in listed or [] if isinstance(entry, str))


def prepare(root: Path, n_tasks: int | None, tiny: bool) -> int:
    """Make the copy at `root` the synthetic DAG of `n_tasks` (None: the quick start's, as
    shipped), `dag.yaml` written anew by `gpt1 dag` where the copy has one or its dvc.yaml loads
    one (`reads_dag_file`), and commit it. The number of registry tasks."""
    if n_tasks is not None:
        synthetic_params(root / "params.yaml", n_tasks, tiny)
        # the shipped lock describes the shipped DAG: DVC would keep its stages' entries
        (root / "dvc.lock").unlink(missing_ok=True)
    if reads_dag_file(root):
        subprocess.run([sys.executable, "-m", "gpt1.cli", "dag"], cwd=root, env=dvc_env(),
                       check=True)
    commit_copy(root)
    return len(read_yaml((root / "params.yaml").read_text(encoding="utf-8"))["tasks"])


def sizes_arg(text: str) -> list[int]:
    try:
        sizes = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected sizes like 4,16,48, got {text!r}") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"sizes must be whole numbers >= 1, got {text!r}")
    return sizes


def main(argv: list[str] | None = None) -> Path:
    p = parser(__doc__.splitlines()[0])
    p.set_defaults(repeats=3)
    p.add_argument("--sizes", type=sizes_arg, default=list(SIZES),
                   help="registry tasks of each synthetic DAG (default 4,16,48)")
    p.add_argument("--skip-quickstart", action="store_true",
                   help="measure the synthetic DAGs only")
    args = p.parse_args(argv)
    if args.repeats < 1:
        p.error("--repeats must be >= 1")
    sizes = [TINY_SIZE] if args.tiny else args.sizes
    dags: list[int | None] = ([] if args.skip_quickstart or args.tiny else [None]) + sizes
    runs: list[DagRun] = []
    path = args.out / "dag.json"
    with tempfile.TemporaryDirectory(prefix="gpt1-dag-") as tmp:
        # one snapshot of the working tree, which every DAG copies: the same code throughout,
        # however this checkout changes while the benchmark runs; its commit is the one recorded
        code = provenance()
        snapshot = copy_tree(Path(tmp) / "snapshot")
        for i, n_tasks in enumerate(dags):
            root = Path(tmp) / f"dag{i}"
            shutil.copytree(snapshot, root, symlinks=True)
            registry = prepare(root, n_tasks, args.tiny)
            name = QUICKSTART if n_tasks is None else f"synthetic, {n_tasks} tasks"
            runs.append(measure(name, root, registry, args.repeats))
            shutil.rmtree(root, ignore_errors=True)
            settings = {
                "repeats": args.repeats, "tiny": args.tiny, "sizes": sizes,
                "quickstart": None in dags, "out": str(args.out),
                "per_stage": {run.name: [[g.stage, round(g.span, 3), g.seconds]
                                         for g in run.gaps] for run in runs},
                "noop_repro_s": {run.name: run.noop_repro for run in runs},
                "status_s": {run.name: run.status for run in runs},
            }
            path = publish([dag_table(runs), group_table(runs), targets_table(targets(runs))],
                           args.out, "dag", settings, code, show=i == len(dags) - 1)
    return path


if __name__ == "__main__":
    main()
