#!/bin/bash
# Distributed benchmark (issue 5, "Measure"): 3 and 4 ranks on one machine, each with a
# memory budget of 25 % of its share of the dataset, all ranks of a run in one benchmark
# cell (cgroup v1 memory limit incl. page cache + blkio read throttle of regime A, caches
# dropped first). Per world size R:
#   dist-on   mpirun -np R hdmlp-bench --mpi, prefetch on (window 256)
#   dist-off  the same with --prefetch 0
#   indep     R independent single-rank hdmlp-bench processes, no exchange: each runs a
#             full single-rank epoch (every sample, seeds 1..R) with the same per-rank
#             budget, in the same cell (the same shared throttle) -- R times the samples
#             of the distributed job, so compare per delivered sample as well as per epoch
# See tests/bench/README.md ("Distributed benchmark").
#
#   tests/bench/dist_bench.sh [--build DIR] [--out DIR] [--work DIR] [--count N]
#                             [--epochs E] [--ranks "3 4"] [--small] [--keep-data]
#
# Needs root, writable cgroup v1 memory + blkio controllers and mpirun (else: SKIP, exit 0),
# the built hdmlp-bench and hdmlp-pack (--build, default build/), /usr/bin/python3.
# Output: OUT/runs.jsonl, OUT/table.txt, OUT/logs/.
set -u
set -o pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
BENCH_NAME=dist_bench
# shellcheck source-path=SCRIPTDIR source=bench_lib.sh
. "$HERE/bench_lib.sh"
OUT=$PWD/dist-bench-out
WORK=${TMPDIR:-/var/tmp}/hdmlp-dist-bench
COUNT=6000
EPOCHS=2
RANKS="3 4"

while [ $# -gt 0 ]; do
    case $1 in
    --count) COUNT=${2:?}; shift 2 ;;
    --epochs) EPOCHS=${2:?}; shift 2 ;;
    --ranks) RANKS=${2:?}; shift 2 ;;
    --small) COUNT=2500 EPOCHS=1; shift ;;
    *) bench_option "$@"; shift "$BENCH_SHIFT" ;;
    esac
done

bench_tools
MPIRUN=${HDMLP_MPIRUN:-$(command -v mpirun || true)}
[ -n "$MPIRUN" ] && [ -x "$MPIRUN" ] || skip "mpirun not found"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none

# ---- the cell (bench_lib.sh, as bench_loader.sh): cgroup v1 memory + blkio ---------------
bench_need_root "cgroups, drop_caches"
cell_init hdmlp-dist-cell-$$
bench_dirs
cell_disk "$WORK"
log "work dir $WORK on $DISK ($DEV); output $OUT"
bench_traps :

# prewarm: binaries, libraries and MPI's start-up files into the page cache, outside the
# cell (the cell measures data I/O, not start-up from a throttled disk).
prewarm() {
    "$MPIRUN" -np 2 --oversubscribe "$BENCH" "$WORK/warm" --mpi --memory 1M --quiet >/dev/null 2>&1
    "$BENCH" "$WORK/warm" --memory 1M --quiet >/dev/null 2>&1
}

# ---- data ---------------------------------------------------------------------------------
MiB=1048576
MB400=400000000
IOPS_A=150
COST_A="--op-us 6667 --bandwidth 400MB" # regime A's cost model, as bench_loader.sh
ALLOWANCE=$((192 * MiB))                # per process: binary, MPI, gRPC, thread stacks
K=16 # with K = 64 a 25 % share of a rank is below the minimum budget (chunk buffers, batch reserve)
BATCH=4 # as bench_loader.sh's regime A (scaled-down datasets, scaled-down batch)

T_START=$(date +%s)
gen_tree img "$COUNT" 112640 0.6 21
gen_tree warmtree 64 4096 0 10
pack ds "$WORK/img/files" $K
pack warm "$WORK/warmtree/files" 4
RAW=$(tree_bytes img)
STORED=$(du -sb "$WORK/ds" | cut -f1)
T_DATA=$(date +%s)
log "dataset: $COUNT samples, $RAW raw bytes, K=$K; ready in $((T_DATA - T_START)) s"

RUNS=$OUT/runs.jsonl
: >"$RUNS"
record() { # TAG KIND WORLD BUDGET RESULT_FILES...
    local tag=$1 kind=$2 world=$3 budget=$4
    shift 4
    local res=() f
    for f in "$@"; do
        res+=("$(last_json "$f")")
    done
    local joined
    joined=$(printf '%s\n' "${res[@]}" | awk 'NF { printf "%s%s", sep, $0; sep = ", " }')
    echo "{\"tag\": \"$tag\", \"kind\": \"$kind\", \"world\": $world, \"budget\": $budget," \
        "\"raw_bytes\": $RAW, \"stored_bytes\": $STORED, \"samples\": $COUNT, \"epochs\": $EPOCHS," \
        "\"cell\": $CELL_JSON, \"results\": [$joined]}" >>"$RUNS"
}

COMMON=(--epochs "$EPOCHS" --batch $BATCH --threads 2 --direct --json --quiet)
for R in $RANKS; do
    BUDGET=$((RAW / R / 4)) # 25 % of a rank's share
    LIMIT=$((R * (BUDGET + ALLOWANCE)))
    for pf in 256 0; do
        tag=dist-R$R-pf$pf
        log "$tag: budget $BUDGET B per rank, cell limit $LIMIT B"
        # shellcheck disable=SC2086
        cell_run "$tag" $LIMIT $MB400 $IOPS_A -- "$MPIRUN" -np "$R" --oversubscribe "$BENCH" \
            "$WORK/ds" --mpi --memory "$BUDGET" --seed 1 --prefetch $pf $COST_A "${COMMON[@]}" ||
            log "  FAILED (rc $?): $(tail -3 "$OUT/logs/$tag.err")"
        record "$tag" "dist-$([ $pf = 0 ] && echo off || echo on)" "$R" "$BUDGET" "$OUT/logs/$tag.out"
    done
    tag=indep-R$R
    log "$tag: $R independent single-rank processes, budget $BUDGET B each"
    # shellcheck disable=SC2016,SC2086
    cell_run "$tag" $LIMIT $MB400 $IOPS_A -- bash -c '
        out=$1 r=$2; shift 2
        for i in $(seq 1 "$r"); do "$@" --seed "$i" >"$out.$i" 2>"$out.$i.err" & done
        rc=0; for j in $(jobs -p); do wait "$j" || rc=1; done; exit $rc' \
        indep "$OUT/logs/$tag.p" "$R" "$BENCH" "$WORK/ds" --memory "$BUDGET" $COST_A \
        "${COMMON[@]}" || log "  FAILED (rc $?): $(cat "$OUT/logs/$tag".p.*.err | tail -3)"
    files=()
    for i in $(seq 1 "$R"); do files+=("$OUT/logs/$tag.p.$i"); done
    record "$tag" indep "$R" "$BUDGET" "${files[@]}"
done
T_END=$(date +%s)
log "runs done in $((T_END - T_DATA)) s"

cat >"$OUT/meta.json" <<EOF
{$(meta_host), "device": "$DISK", "dev": "$DEV",
 "git": "$(git_rev)", "samples": $COUNT,
 "raw_bytes": $RAW, "k": $K, "batch": $BATCH, "epochs": $EPOCHS, "ranks": "$RANKS", "read_bps": $MB400,
 "read_iops": $IOPS_A, "allowance_per_process": $ALLOWANCE,
 "seconds": {"data": $((T_DATA - T_START)), "runs": $((T_END - T_DATA))}}
EOF
"$PY" "$HERE/dist_report.py" "$OUT" | tee "$OUT/table.txt" || die "report failed"
