#!/bin/bash
# Randomness-I/O frontier: read operations and bytes read / bytes delivered against the
# randomness figures (same_chunk_distance, epoch_position_correlation) for the strict order
# (K in {4, 16, 64}; policy clairvoyant and fill-rate, refill auto with regime A's and B's
# cost, fill-rate whole), the pool order at 1, 2, 4 and 8 reads per chunk, and a true
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
BENCH_NAME=frontier_bench
# shellcheck source-path=SCRIPTDIR source=bench_lib.sh
. "$HERE/bench_lib.sh"
OUT=$PWD/bench-frontier-out
WORK=${TMPDIR:-/var/tmp}/hdmlp-frontier-bench
MEM=25
EPOCHS=3

while [ $# -gt 0 ]; do
    case $1 in
    --memory) MEM=${2:?}; shift 2 ;;
    --epochs) EPOCHS=${2:?}; shift 2 ;;
    *) bench_option "$@"; shift "$BENCH_SHIFT" ;;
    esac
done

bench_tools
bench_need_option --order
bench_need_numpy
bench_dirs
bench_traps :

if [ "$SMALL" = 1 ]; then N=1500 BATCH=2; else N=5000 BATCH=4; fi
KS="4 16 64"
gen_tree tree "$N" 112640 0.6 11
for k in $KS; do
    pack "k$k" "$WORK/tree/files" "$k"
done

RUNS=$OUT/runs.jsonl
: >"$RUNS"
# run NAME K ARGS...: one warm run of EPOCHS epochs; its JSON into runs.jsonl.
run() {
    local name=$1 k=$2 l0 res
    shift 2
    cat "$WORK/k$k"/* >/dev/null
    l0=$(loadavg)
    log "$name K=$k (load $l0)"
    "$BENCH" "$WORK/k$k" --memory "$MEM%" --batch "$BATCH" --threads 2 --seed 1 --epochs "$EPOCHS" \
        --json --quiet "$@" >"$OUT/logs/$name-k$k.out" 2>"$OUT/logs/$name-k$k.err" ||
        log "  FAILED: $(tail -2 "$OUT/logs/$name-k$k.err")"
    res=$(last_json "$OUT/logs/$name-k$k.out")
    echo "{\"mode\": \"$name\", \"k\": $k, \"args\": \"$*\", \"load\": \"$l0\", \"result\": ${res:-null}}" >>"$RUNS"
}
COST_A="--op-us 6667 --bandwidth 400MB"
COST_B="--op-us 100 --bandwidth 400MB"
# shellcheck disable=SC2086
for k in $KS; do
    run clairvoyant-A "$k" --policy clairvoyant $COST_A
    run clairvoyant-B "$k" --policy clairvoyant $COST_B
    run fill-rate-A "$k" --policy fill-rate $COST_A
    run fill-rate-B "$k" --policy fill-rate $COST_B
    run fill-rate-whole "$k" --policy fill-rate --refill whole
    for r in 1 2 4 8; do
        run "pool-r$r" "$k" --order pool --pool-reads "$r" $COST_A
    done
done

cat >"$OUT/meta.json" <<EOF
{$(meta_host),
 "git": "$(git_rev)",
 "bench": "$BENCH", "bench_version": "$("$BENCH" -V 2>/dev/null | head -1)",
 "samples": $N, "batch": $BATCH, "memory_pct": $MEM, "epochs": $EPOCHS, "ks": "$KS",
 "sizes": $(cat "$WORK/tree/sizes.json")}
EOF
"$PY" "$HERE/frontier_report.py" "$OUT" || die "report failed"
