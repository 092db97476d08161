"""The wheels `bench.device_check` needs on a GPU machine that holds torch and transformers but
cannot reach a package index, downloaded here at the versions installed here.

    python -m bench.device_wheels .whl      # then carry .whl beside the checkout

There: `python3 -m pip install --no-index --no-deps --target /tmp/site .whl/*.whl` and
`PYTHONPATH=/tmp/site` (docs/scaling.md, "GPU check").
"""

from __future__ import annotations

import argparse
import importlib.metadata
import subprocess
import sys
from pathlib import Path

# Imported by bench.device_check and found neither in torch's and transformers' requirements
# nor in a CUDA machine's usual image (numpy, pyarrow, tokenizers, safetensors, rich, psutil):
# params validation (pydantic), params.yaml (ruamel.yaml), text cleaning (ftfy).
WHEELS = ("pydantic", "pydantic-core", "annotated-types", "typing-inspection", "ruamel.yaml",
          "ruamel.yaml.clib", "ftfy", "wcwidth")
ALREADY_THERE = ("numpy", "pyarrow", "tokenizers", "safetensors", "rich", "psutil")
PYTHON, PLATFORMS = "3.12", ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64",
                             "manylinux2014_x86_64")


def pinned() -> list[str]:
    """`WHEELS` at the versions installed here, the ones the tests ran with."""
    return [f"{name}=={importlib.metadata.version(name)}" for name in WHEELS]


def download_command(folder: Path, python: str = PYTHON) -> list[str]:
    """pip's command that fetches the pinned wheels for CPython `python` on x86-64 Linux."""
    platforms = [arg for platform in PLATFORMS for arg in ("--platform", platform)]
    return [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
            "--python-version", python, "--implementation", "cp", *platforms,
            "-d", str(folder), *pinned()]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folder", type=Path, help="where the wheels go (e.g. .whl)")
    p.add_argument("--python", default=PYTHON, help="the GPU machine's Python (major.minor)")
    args = p.parse_args(argv)
    subprocess.run(download_command(args.folder, args.python), check=True)


if __name__ == "__main__":
    main()
