#!/bin/bash
# Training fidelity (issue 14): runs fidelity_bench.py (every order, both tasks, at nice 10)
# and renders its tables and plot with fidelity_report.py. See tests/bench/README.md.
#
#   tests/bench/fidelity_bench.sh [--build DIR] [--out DIR] [--results DIR] [--quick]
#                                 [-- fidelity_bench.py options: --seeds 5 --epochs 4 ...]
#
# --quick: 2 seeds, 2 epochs (about a third of the time; the figures are only a smoke
# test). Needs the built tree (hdmlp-pack, hdmlp-bench, the Python module), Debian's
# dataset-fashion-mnist, python3-torch and python3-matplotlib for the plot. No root.
# Output: OUT/runs.jsonl, OUT/bench.jsonl, OUT/config.json, OUT/log.txt;
# RESULTS/fidelity.md and RESULTS/fidelity.png (default RESULTS = OUT).
set -eu
set -o pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$HERE/../../build
OUT=$PWD/bench-fidelity-out
RESULTS=
EXTRA=()
while [ $# -gt 0 ]; do
    case $1 in
    --build) BUILD=${2:?--build needs a directory}; shift 2 ;;
    --out) OUT=${2:?--out needs a directory}; shift 2 ;;
    --results) RESULTS=${2:?--results needs a directory}; shift 2 ;;
    --quick) EXTRA+=(--seeds 2 --epochs 2); shift ;;
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
PYTHONPATH=$BUILD/python nice -n 10 /usr/bin/python3 "$HERE/fidelity_bench.py" --build "$BUILD" \
    --out "$OUT" "${EXTRA[@]}" 2>&1 | tee "$OUT/log.txt"
/usr/bin/python3 "$HERE/fidelity_report.py" "$OUT" --md "$RESULTS/fidelity.md" "${PNG[@]}"
