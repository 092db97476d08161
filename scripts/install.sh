#!/usr/bin/env bash
# Create (or reuse) the virtual environment .venv and install gpt1 into it.
#   scripts/install.sh        runtime only
#   scripts/install.sh dev    with the test and lint tools
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
pip=("$VENV/bin/python" -m pip --disable-pip-version-check)
"${pip[@]}" install --quiet --upgrade pip

if "$VENV/bin/python" -c "import torch" 2>/dev/null; then
    echo "torch $("$VENV/bin/python" -c 'import torch; print(torch.__version__)') already installed"
elif command -v nvidia-smi >/dev/null 2>&1; then
    echo "NVIDIA GPU found: installing torch==$TORCH_VERSION from PyPI (CUDA build)"
    "${pip[@]}" install --quiet "torch==$TORCH_VERSION"
elif "${pip[@]}" install --quiet --no-index --no-deps "torch==$TORCH_VERSION" 2>/dev/null; then
    "${pip[@]}" install --quiet "torch==$TORCH_VERSION"  # its dependencies, from the index
    echo "no GPU: installed torch==$TORCH_VERSION from a local wheel"
else
    echo "no GPU: installing the CPU build of torch==$TORCH_VERSION"
    "${pip[@]}" install --quiet "torch==$TORCH_VERSION" \
        --index-url "${TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}"
fi

extra=""
[ "${1:-}" = "dev" ] && extra="[dev]"
"${pip[@]}" install --quiet -e ".$extra"
echo "installed gpt1$extra into $VENV"
