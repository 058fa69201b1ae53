#!/bin/bash
# Training fidelity (issues 14 and 23): runs fidelity_bench.py (every order, all four tasks,
# at nice 10) and renders its tables and plot with fidelity_report.py. See tests/bench/README.md.
#
#   tests/bench/fidelity_bench.sh [--build DIR] [--out DIR] [--results DIR] [--quick]
#                                 [--blas DIR] [-- fidelity_bench.py options: --seeds 10 ...]
#
# --quick: 2 seeds, 2 epochs (a smoke test: ~4 min here with --blas).
# --blas DIR: a directory holding an optimised libblas.so.3 (OpenBLAS), put first on
# LD_LIBRARY_PATH for this run only, one BLAS thread. Debian's torch does its matrix
# products through the system's libblas.so.3, which is the reference BLAS unless an
# optimised one is installed: ~10x slower here. Without changing the system:
#   apt-get download libopenblas0-pthread && dpkg -x libopenblas0-pthread_*.deb /tmp/ob
#   --blas /tmp/ob/usr/lib/x86_64-linux-gnu/openblas-pthread
# (config.json records the BLAS the run mapped; the orders are compared under one BLAS.)
# Needs the built tree (hdmlp-pack, hdmlp-bench, the Python module), Debian's
# dataset-fashion-mnist, python3-torch, python3-numpy and python3-matplotlib for the plot.
# No root.
# Output: OUT/runs.jsonl, OUT/bench.jsonl, OUT/config.json, OUT/log.txt;
# RESULTS/fidelity.md and RESULTS/fidelity.png (default RESULTS = OUT) and, when RESULTS is
# another directory, copies of the four as RESULTS/fidelity_runs.jsonl etc.
set -eu
set -o pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$HERE/../../build
OUT=$PWD/bench-fidelity-out
RESULTS=
BLAS=
EXTRA=()
while [ $# -gt 0 ]; do
    case $1 in
    --build) BUILD=${2:?--build needs a directory}; shift 2 ;;
    --out) OUT=${2:?--out needs a directory}; shift 2 ;;
    --results) RESULTS=${2:?--results needs a directory}; shift 2 ;;
    --quick) EXTRA+=(--seeds 2 --epochs 2); shift ;;
    --blas) BLAS=$(cd "${2:?--blas needs a directory}" && pwd); shift 2 ;;
    --) shift; EXTRA+=("$@"); break ;;
    *) echo "fidelity_bench.sh: unknown option $1 (see the header of $0)" >&2; exit 2 ;;
    esac
done
BUILD=$(cd "$BUILD" && pwd)
RESULTS=${RESULTS:-$OUT}
mkdir -p "$OUT" "$RESULTS"
if ! /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
    echo "fidelity_bench.sh: no matplotlib: apt-get install python3-matplotlib (the plot is skipped)" >&2
    PNG=()
else
    PNG=(--png "$RESULTS/fidelity.png")
fi
if [ -n "$BLAS" ]; then
    [ -e "$BLAS/libblas.so.3" ] || { echo "fidelity_bench.sh: no libblas.so.3 in $BLAS" >&2; exit 2; }
    export LD_LIBRARY_PATH=$BLAS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} OPENBLAS_NUM_THREADS=1
fi
TEE=(tee "$OUT/log.txt")
for a in "${EXTRA[@]}"; do [ "$a" = --resume ] && TEE=(tee -a "$OUT/log.txt"); done
PYTHONPATH=$BUILD/python nice -n 10 /usr/bin/python3 "$HERE/fidelity_bench.py" --build "$BUILD" \
    --out "$OUT" "${EXTRA[@]}" 2>&1 | "${TEE[@]}"
if [ "$(cd "$RESULTS" && pwd)" != "$(cd "$OUT" && pwd)" ]; then
    # the raw files beside the tables, as fidelity_report.py reads them back
    for f in runs.jsonl bench.jsonl config.json log.txt; do
        cp "$OUT/$f" "$RESULTS/fidelity_$f"
    done
fi
/usr/bin/python3 "$HERE/fidelity_report.py" "$OUT" --md "$RESULTS/fidelity.md" "${PNG[@]}"
