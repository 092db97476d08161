#!/usr/bin/env bash
# One GPU lease's benchmarks: prepared here, run there in one command (docs/scaling.md,
# "GPU check").
#
#   bench/gpu_lease.sh prepare   # here, where the pipeline is installed (spaCy, pydantic)
#   bench/gpu_lease.sh run       # on the GPU machine: every result under $OUT (./gpu_out)
#
# prepare writes .gpu_lease/ (GPU_LEASE_DIR): ftdata/, SST-2 and Story Cloze cleaned and encoded
# at the paper preset's sizes (bench.finetune_transformers --prepare; spaCy runs here), and
# whl/, the wheels the benchmarks import beyond a CUDA image's packages (bench.device_wheels:
# pydantic, ruamel.yaml, ftfy). Carry .gpu_lease with the checkout.
#
# run installs those wheels under /tmp/site where the machine lacks them, then runs these parts
# in order, each under its own timeout, all within GPU_LEASE_BUDGET seconds (540: a command of
# at most 10 minutes, with room for the machine's start; a part that ends early leaves its time
# to the next):
#   a. profile: one training step and one eval batch of each side per task, eager
#      (bench.finetune_transformers --profile-only), their Chrome traces in traces.tar.gz, then
#      each side's costliest kernels by GPU time and by host time (bench.profiling.summary)
#   b. fine-tuning against transformers, 3 rounds after a warm-up of each side, ours (eager) with
#      its batch widths rounded (finetune.train.pad_to_multiple auto: 64 on CUDA) and not (1);
#      GPU_LEASE_FT_ARGS adds options to both runs (e.g. --compile: ours compiled too)
#   c. generation against transformers' generate (bench.device_check --parts generation)
#   d. the paper-size train step against transformers, then its profile (bench.train_step)
# $OUT then holds lease.log (all that was printed), traces.tar.gz and one JSON per part in a
# folder of its own: 7 files, none deeper than $OUT/part/file, as a lease hands them back.
#
# GPU_LEASE_DEVICE=cpu GPU_LEASE_TINY=1 bench/gpu_lease.sh prepare (then run): the same commands
# at toy sizes on a CPU, a rehearsal of a few minutes. GPU_LEASE_PYTHON: the interpreter
# (default .venv/bin/python where there is one, else python3).

set -uo pipefail
cd "$(dirname "$0")/.."

DIR=${GPU_LEASE_DIR:-.gpu_lease}
DEVICE=${GPU_LEASE_DEVICE:-cuda}
BUDGET=${GPU_LEASE_BUDGET:-540}
OUT=${OUT:-./gpu_out}
if [[ -n ${GPU_LEASE_PYTHON:-} ]]; then PY=$GPU_LEASE_PYTHON
elif [[ -x .venv/bin/python ]]; then PY=.venv/bin/python
else PY=python3
fi
TINY=()
[[ ${GPU_LEASE_TINY:-0} == 1 ]] && TINY=(--tiny)
export PYTHONUNBUFFERED=1

prepare() {
    "$PY" -m bench.finetune_transformers --preset paper "${TINY[@]}" --prepare "$DIR/ftdata" &&
        "$PY" -m bench.device_wheels "$DIR/whl"
}

# part NAME SECONDS ARGS...: `python ARGS` under a timeout of SECONDS, or of what is left of the
# budget if less; an interrupt first (the benchmark keeps what it wrote), a kill 15 s later
part() {
    local name=$1 limit=$2 left=$((BUDGET - SECONDS)) started=$SECONDS rc
    shift 2
    ((left < limit)) && limit=$left
    if ((limit < 20)); then
        echo "== $name: skipped, ${left}s of the ${BUDGET}s budget left"
        SUMMARY+=("$name: skipped")
        return
    fi
    echo "== $name (timeout ${limit}s): $PY $*"
    timeout --signal=INT --kill-after=15 "$limit" "$PY" "$@"
    rc=$?
    echo "== $name: exit $rc after $((SECONDS - started))s$( ((rc == 124)) && echo ', timed out')"
    SUMMARY+=("$name: exit $rc, $((SECONDS - started))s")
}

# top_ops RESULT ROWS: each side's costliest ops in a result's profile, ROWS of each table
top_ops() {
    [[ -f $1 ]] && "$PY" -c 'import json, sys
from bench.profiling import summary
print(summary(json.load(open(sys.argv[1]))["settings"], int(sys.argv[2])))' "$1" "$2"
}

run() {
    mkdir -p "$OUT"
    exec > >(tee -a "$OUT/lease.log") 2>&1
    local log=$!
    SECONDS=0
    SUMMARY=()
    echo "== gpu_lease run on $DEVICE, budget ${BUDGET}s, results in $OUT ($(date -u +%FT%TZ))"
    command -v nvidia-smi >/dev/null && nvidia-smi -L
    if compgen -G "$DIR/whl/*.whl" >/dev/null &&
        ! "$PY" -c "import pydantic, ruamel.yaml, ftfy" 2>/dev/null; then
        "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target /tmp/site "$DIR"/whl/*.whl || exit 1
        export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
    fi
    local ft=(-m bench.finetune_transformers --preset paper --bundle "$DIR/ftdata"
              --device "$DEVICE" "${TINY[@]}")

    part "a. profile" 100 "${ft[@]}" --profile-only --profile-steps 1 \
        --trace "$OUT/traces" --out "$OUT/profile"
    if [[ -d $OUT/traces ]]; then
        tar -C "$OUT" -czf "$OUT/traces.tar.gz" traces && rm -r "$OUT/traces"
    fi
    top_ops "$OUT/profile/finetune_transformers.json" 10
    for pad in auto 1; do
        part "b. fine-tuning, pad_to_multiple $pad" 130 "${ft[@]}" --pad-to-multiple "$pad" \
            --repeats 3 --seeds 3 --out "$OUT/pad-$pad" ${GPU_LEASE_FT_ARGS:-}
    done
    part "c. generation" 70 -m bench.device_check --parts generation --device "$DEVICE" \
        "${TINY[@]}" --out "$OUT/generation"
    local steps=(--preset paper --steps 10 --warmup 5)
    [[ ${#TINY[@]} -gt 0 ]] && steps=(--tiny --steps 2 --warmup 1)
    part "d. train step" 110 -m bench.train_step "${steps[@]}" --device "$DEVICE" --repeats 3 \
        --curve-steps 0 --profile --out "$OUT/train-step"
    top_ops "$OUT/train-step/train_step.json" 8

    echo "== done in ${SECONDS}s:"
    printf '   %s\n' "${SUMMARY[@]}"
    (cd "$OUT" && find . -type f -printf '   %p %s bytes\n' | sort)
    exec >&- 2>&-
    wait "$log"  # tee's last lines in the log before the command returns
}

case ${1:-} in
    prepare) prepare ;;
    run) run ;;
    *) echo "usage: bench/gpu_lease.sh prepare|run (see its header)" >&2; exit 2 ;;
esac
