"""`python -m bench.quickstart`: the tally it reads from pytest's real closing line, the command
it times, the table it publishes (the clone and the two `make` runs themselves are what it
measures: they take minutes, and CI runs both commands anyway)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bench.quickstart import Timed, pytest_tally, quickstart_table, run_timed


def test_the_tally_is_read_from_what_pytest_prints(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_two.py").write_text(
        "import pytest\n\ndef test_ok():\n    pass\n\n"
        "@pytest.mark.skip(reason='x')\ndef test_skipped():\n    pass\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:xdist",
                           "-p", "no:cacheprovider", "-c", str(tmp_path / "pytest.ini"),
                           str(tmp_path)], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stdout
    assert pytest_tally(done.stdout) == "1 passed, 1 skipped"
    assert pytest_tally("no tally here\n") is None


def test_a_command_is_timed_with_its_exit_status_and_output(tmp_path: Path) -> None:
    timed = run_timed([sys.executable, "-c", "print('hello'); raise SystemExit(3)"], tmp_path,
                      {})
    assert (timed.returncode, timed.output) == (3, "hello\n")
    assert timed.seconds > 0


def test_the_table_gives_each_command_its_time_and_outcome() -> None:
    runs = [Timed("make pipeline", 0, 230.54, "..."),
            Timed("make test", 1, 2087.3, "==== 2 failed, 863 passed in 2087.31s (0:34:47) ====\n")]
    table = quickstart_table(runs, "result  ours\nval loss  2.286\n\n")
    assert table.rows == [
        {"command": "make pipeline", "exit": 0, "seconds": 230.5, "minutes": 3.8, "outcome": "ok"},
        {"command": "make test", "exit": 1, "seconds": 2087.3, "minutes": 34.8,
         "outcome": "2 failed, 863 passed"}]
    assert table.notes[1:] == ["result  ours", "val loss  2.286"]
