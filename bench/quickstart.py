"""The README's quick start as a new user meets it: a fresh clone of this checkout's commit,
`make pipeline` (install included) and then, with `--test`, `make test` in the same clone, each
timed from outside; the pipeline's headline table and the suite's tally are kept beside the
times. This is where the README's quick-start times come from.

    python -m bench.quickstart            # about 4 minutes on 2 cores
    python -m bench.quickstart --test     # and the suite after it: about 15 minutes more

Run it on an otherwise idle machine. It measures the commit checked out (uncommitted changes are
not in the clone). `make test`'s end-to-end tests read `../shared/data`: the clone is told where
it is through GPT1_SHARED_DATA; set CI=true to have missing resources fail rather than skip.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.common import DATA, RESULTS, Table, provenance, publish

REPO = Path(__file__).resolve().parents[1]
HEADLINE = Path("reports/headline.txt")
# pytest's closing line: `==== 865 passed, 2 skipped in 2087.31s (0:34:47) ====`
PYTEST_TALLY = re.compile(r"^=+ (.*\d+ (?:passed|failed|errors?).*) in [\d.]+s\b.* =+$")


@dataclass(frozen=True)
class Timed:
    """One command run in the clone: its exit status, wall seconds and full output."""

    command: str
    returncode: int
    seconds: float
    output: str


def run_timed(command: list[str], cwd: Path, env: dict[str, str]) -> Timed:
    """Run `command` in `cwd`, its output echoed as it comes and kept."""
    started = time.perf_counter()
    proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        print(line, end="", flush=True)
        lines.append(line)
    returncode = proc.wait()
    return Timed(" ".join(command), returncode, time.perf_counter() - started, "".join(lines))


def pytest_tally(output: str) -> str | None:
    """pytest's closing tally (`865 passed, 2 skipped`) in `output`, or None if it has none."""
    found = [m.group(1) for line in output.splitlines()
             if (m := PYTEST_TALLY.match(line.strip()))]
    return found[-1] if found else None


def quickstart_table(runs: list[Timed], headline: str | None) -> Table:
    """The times of `runs`, each with its outcome; the pipeline's headline as notes."""
    table = Table("quick start, in one fresh clone", ["command", "exit", "seconds", "minutes",
                                                      "outcome"])
    for timed in runs:
        outcome = pytest_tally(timed.output) if timed.command == "make test" else None
        table.add(command=timed.command, exit=timed.returncode, seconds=round(timed.seconds, 1),
                  minutes=round(timed.seconds / 60, 1),
                  outcome=outcome or ("ok" if timed.returncode == 0 else "failed"))
    if headline:
        table.notes += ["the pipeline's headline (reports/headline.txt):",
                        *(line for line in headline.splitlines() if line.strip())]
    return table


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.quickstart", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--test", action="store_true", help="run `make test` after the pipeline")
    p.add_argument("--out", type=Path, default=RESULTS, help="where quickstart.json is written")
    args = p.parse_args(argv)
    env = {**os.environ, "GPT1_SHARED_DATA": str(DATA)}
    env.pop("VIRTUAL_ENV", None)  # the clone installs and uses its own .venv
    with tempfile.TemporaryDirectory(prefix="gpt1-quickstart-") as tmp:
        clone = Path(tmp) / "gpt1"
        subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True)
        # the code measured is the clone's: this checkout may move on while it runs
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=clone, capture_output=True,
                                text=True, check=True).stdout.strip()
        started = provenance()["date"]
        runs = [run_timed(["make", "pipeline"], clone, env)]
        headline_file = clone / HEADLINE
        headline = headline_file.read_text(encoding="utf-8") if headline_file.is_file() else None
        if args.test and runs[0].returncode == 0:
            runs.append(run_timed(["make", "test"], clone, env))
    publish([quickstart_table(runs, headline)], args.out, "quickstart",
            {"test": args.test, "ci": os.environ.get("CI", "")},
            code={"commit": commit, "dirty": False, "date": started})
    return max(timed.returncode for timed in runs)


if __name__ == "__main__":
    sys.exit(main())
