"""Generate the sample data bundled with gpt1 (``gpt1/sample_data/``).

    python -m tools.sample_data [--out DIR] [--seed N]
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from tools.sample_data.generate import SEED, generate

DEFAULT_OUT = Path(__file__).resolve().parents[2] / "gpt1" / "sample_data"


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the command line, write the sample and say where."""
    parser = argparse.ArgumentParser(prog="python -m tools.sample_data",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help="output folder (default: gpt1/sample_data in this repository)")
    parser.add_argument("--seed", type=int, default=SEED, help=f"random seed (default {SEED})")
    args = parser.parse_args(argv)
    out: Path = args.out
    generate(out, args.seed)
    print(f"wrote the sample data to {out}")


if __name__ == "__main__":
    main()
