#!/usr/bin/env bash
# Create (or reuse) the virtual environment .venv and install gpt1 into it.
#   scripts/install.sh        runtime only
#   scripts/install.sh dev    with the test and lint tools
# Packages go in with uv (itself installed from PyPI into the venv): with its cache warm a whole
# install takes seconds, where pip spends a minute and a half of the quick start's five.
# Without an NVIDIA GPU, torch is the CPU build (a plain `pip install torch` would fetch a
# multi-GB CUDA build). With a GPU, install the torch build for your CUDA into .venv first.
set -euo pipefail
cd "$(dirname "$0")/.."

TORCH_VERSION="${TORCH_VERSION:-2.13.0}"
PYTHON="${PYTHON:-python3}"
VENV="${VENV:-.venv}"

"$PYTHON" - <<'PY'
import sys
if sys.version_info < (3, 11):
    sys.exit(f"gpt1 needs Python >= 3.11, found {sys.version.split()[0]}; set PYTHON=python3.11")
PY

[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m uv --version >/dev/null 2>&1 ||
    "$VENV/bin/python" -m pip --disable-pip-version-check install --quiet uv
# Python caches each module's bytecode as it first imports it, unless PYTHONDONTWRITEBYTECODE is
# set (as in many containers and CI images): then every process of every stage would compile
# torch, DVC and the rest anew, ~5 s each; uv compiles what it installs once instead (~20 s).
if [ -n "${PYTHONDONTWRITEBYTECODE:-}" ]; then export UV_COMPILE_BYTECODE=1; fi
uv=("$VENV/bin/python" -m uv pip install --quiet --python "$VENV/bin/python")
# uv does not read pip's configuration: wheels that pip is told lie on this machine
# (PIP_FIND_LINKS) are offered to uv too
local_wheels=()
for dir in ${PIP_FIND_LINKS:-}; do local_wheels+=(--find-links "$dir"); done

if "$VENV/bin/python" -c "import torch" 2>/dev/null; then
    echo "torch $("$VENV/bin/python" -c 'import torch; print(torch.__version__)') already installed"
elif command -v nvidia-smi >/dev/null 2>&1; then
    echo "NVIDIA GPU found: installing torch==$TORCH_VERSION from PyPI (CUDA build)"
    "${uv[@]}" "torch==$TORCH_VERSION"
elif [ ${#local_wheels[@]} -gt 0 ] &&
        "${uv[@]}" --no-index --no-deps "${local_wheels[@]}" "torch==$TORCH_VERSION" 2>/dev/null; then
    "${uv[@]}" "${local_wheels[@]}" "torch==$TORCH_VERSION"  # its dependencies, from the index
    echo "no GPU: installed torch==$TORCH_VERSION from a local wheel"
else
    echo "no GPU: installing the CPU build of torch==$TORCH_VERSION"
    "${uv[@]}" "torch==$TORCH_VERSION" --index-url "${TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}" \
        --extra-index-url https://pypi.org/simple --index-strategy unsafe-best-match
fi

extra=""
[ "${1:-}" = "dev" ] && extra="[dev]"
"${uv[@]}" -e ".$extra"
echo "installed gpt1$extra into $VENV"
