#!/bin/bash
# Randomness-I/O frontier (issue 6, "Measure"): bytes read / bytes delivered against the
# randomness figures (same_chunk_distance, epoch_position_correlation) for the strict
# protocol (K in {4, 16, 64}; refill whole, ranges and auto), relaxed mode, and a true
# permutation read per file, at one memory ratio. See tests/bench/README.md.
#
#   tests/bench/frontier_bench.sh [--build DIR] [--out DIR] [--work DIR] [--small]
#                                 [--memory PCT] [--epochs E] [--keep-data]
#
# Needs the built hdmlp-bench and hdmlp-pack, /usr/bin/python3 with numpy, gnuplot for the
# plot. No root, no cell: bytes read and the randomness figures are counts that do not
# depend on the storage's speed (the runs read from the page cache).
# Output: OUT/runs.jsonl, OUT/results.json, OUT/table.txt, OUT/frontier.png, OUT/logs/.
set -u
set -o pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
BUILD=$SRC/build
OUT=$PWD/bench-frontier-out
WORK=${TMPDIR:-/var/tmp}/hdmlp-frontier-bench
PY=/usr/bin/python3
SMALL=0
MEM=25
EPOCHS=3
KEEP=0

usage() {
    sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
    exit "${1:-2}"
}
while [ $# -gt 0 ]; do
    case $1 in
    --build) BUILD=${2:?}; shift ;;
    --out) OUT=${2:?}; shift ;;
    --work) WORK=${2:?}; shift ;;
    --small) SMALL=1 ;;
    --memory) MEM=${2:?}; shift ;;
    --epochs) EPOCHS=${2:?}; shift ;;
    --keep-data) KEEP=1 ;;
    -h | --help) usage 0 ;;
    *) echo "frontier_bench: unknown option '$1'" >&2; usage 2 ;;
    esac
    shift
done

log() { echo "[frontier_bench $(date +%H:%M:%S)] $*" >&2; }
die() { echo "frontier_bench: $*" >&2; exit 1; }
skip() { echo "frontier_bench: SKIP: $*"; exit 0; }

BENCH=${HDMLP_BENCH:-$BUILD/loader/hdmlp-bench}
PACK=${HDMLP_PACK:-$BUILD/packer/hdmlp-pack}
[ -x "$BENCH" ] || die "no hdmlp-bench at $BENCH"
[ -x "$PACK" ] || die "no hdmlp-pack at $PACK"
HELP=$("$BENCH" --help 2>&1)
case $HELP in *--relaxed*) ;; *) skip "$BENCH has no --relaxed" ;; esac
[ -x "$PY" ] || PY=$(command -v python3)
"$PY" -c 'import numpy' 2>/dev/null || die "$PY cannot import numpy"

mkdir -p "$WORK" "$OUT/logs" || die "cannot create $WORK or $OUT"
WORK=$(cd "$WORK" && pwd)
OUT=$(cd "$OUT" && pwd)
cleanup() { [ "$KEEP" = 0 ] && rm -rf "$WORK"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ "$SMALL" = 1 ]; then N=1500 BATCH=2; else N=5000 BATCH=4; fi
KS="4 16 64"
if ! { [ -f "$WORK/tree/sizes.json" ] && grep -q "\"count\": $N," "$WORK/tree/sizes.json"; }; then
    rm -rf "$WORK/tree"
    log "generating $N files (lognormal, mean 110 KiB, sigma 0.6)"
    "$PY" "$HERE/loader_gen.py" tree "$WORK/tree" --count "$N" --mean 112640 --sigma 0.6 --seed 11 ||
        die "cannot generate the dataset"
fi
for k in $KS; do
    if [ ! -f "$WORK/k$k/index" ] || [ "$WORK/k$k/index" -ot "$WORK/tree/sizes.json" ]; then
        log "packing K=$k"
        "$PACK" --chunk-size "$k" --seed 7 --compress none --threads 2 --quiet --force \
            -o "$WORK/k$k" "$WORK/tree/files" >"$OUT/logs/pack-k$k.log" 2>&1 || die "hdmlp-pack failed (K=$k)"
    fi
done

RUNS=$OUT/runs.jsonl
: >"$RUNS"
# run NAME K ARGS...: one warm run of EPOCHS epochs; its JSON into runs.jsonl.
run() {
    local name=$1 k=$2 l0 res
    shift 2
    cat "$WORK/k$k"/* >/dev/null
    l0=$(cut -d' ' -f1-3 /proc/loadavg)
    log "$name K=$k (load $l0)"
    "$BENCH" "$WORK/k$k" --memory "$MEM%" --batch "$BATCH" --threads 2 --seed 1 --epochs "$EPOCHS" \
        --json --quiet "$@" >"$OUT/logs/$name-k$k.out" 2>"$OUT/logs/$name-k$k.err" ||
        log "  FAILED: $(tail -2 "$OUT/logs/$name-k$k.err")"
    res=$(grep '^{' "$OUT/logs/$name-k$k.out" | tail -1)
    echo "{\"mode\": \"$name\", \"k\": $k, \"args\": \"$*\", \"load\": \"$l0\", \"result\": ${res:-null}}" >>"$RUNS"
}
COST_A="--op-us 6667 --bandwidth 400MB"
COST_B="--op-us 100 --bandwidth 400MB"
for k in $KS; do
    run strict-whole "$k" --refill whole
    run strict-ranges "$k" --refill ranges
    # shellcheck disable=SC2086
    run strict-auto-A "$k" --refill auto $COST_A
    # shellcheck disable=SC2086
    run strict-auto-B "$k" --refill auto $COST_B
    run relaxed-whole "$k" --relaxed --refill whole
    # shellcheck disable=SC2086
    run relaxed-auto-B "$k" --relaxed --refill auto $COST_B
done

cat >"$OUT/meta.json" <<EOF
{"date": "$(date -u +%FT%TZ)", "kernel": "$(uname -r)", "cpus": $(nproc),
 "git": "$(git -C "$SRC" rev-parse --short HEAD 2>/dev/null || echo unknown)",
 "bench": "$BENCH", "bench_version": "$("$BENCH" -V 2>/dev/null | head -1)",
 "samples": $N, "batch": $BATCH, "memory_pct": $MEM, "epochs": $EPOCHS, "ks": "$KS",
 "sizes": $(cat "$WORK/tree/sizes.json")}
EOF
"$PY" "$HERE/frontier_report.py" "$OUT" || die "report failed"
