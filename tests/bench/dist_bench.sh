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
SRC=$(cd "$HERE/../.." && pwd)
BUILD=$SRC/build
OUT=$PWD/dist-bench-out
WORK=${TMPDIR:-/var/tmp}/hdmlp-dist-bench
PY=/usr/bin/python3
COUNT=6000
EPOCHS=2
RANKS="3 4"
KEEP=0

usage() {
    sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'
    exit "${1:-2}"
}

while [ $# -gt 0 ]; do
    case $1 in
    --build) BUILD=${2:?}; shift ;;
    --out) OUT=${2:?}; shift ;;
    --work) WORK=${2:?}; shift ;;
    --count) COUNT=${2:?}; shift ;;
    --epochs) EPOCHS=${2:?}; shift ;;
    --ranks) RANKS=${2:?}; shift ;;
    --small) COUNT=2500 EPOCHS=1 ;;
    --keep-data) KEEP=1 ;;
    -h | --help) usage 0 ;;
    *) echo "dist_bench: unknown option '$1'" >&2; usage 2 ;;
    esac
    shift
done

log() { echo "[dist_bench $(date +%H:%M:%S)] $*" >&2; }
die() { echo "dist_bench: $*" >&2; exit 1; }
skip() { echo "dist_bench: SKIP: $*"; exit 0; }

BENCH=${HDMLP_BENCH:-$BUILD/loader/hdmlp-bench}
PACK=${HDMLP_PACK:-$BUILD/packer/hdmlp-pack}
[ -x "$BENCH" ] || die "no hdmlp-bench at $BENCH (build it, or pass --build DIR / set HDMLP_BENCH)"
[ -x "$PACK" ] || die "no hdmlp-pack at $PACK (build it, or pass --build DIR / set HDMLP_PACK)"
[ -x "$PY" ] || PY=$(command -v python3)
MPIRUN=${HDMLP_MPIRUN:-$(command -v mpirun || true)}
[ -n "$MPIRUN" ] && [ -x "$MPIRUN" ] || skip "mpirun not found"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none

# ---- the cell (as tests/bench/bench_loader.sh): cgroup v1 memory + blkio -----------------
[ "$(id -u)" = 0 ] || skip "needs root (cgroups, drop_caches)"
cg_dir() { echo "/sys/fs/cgroup/$1$(awk -F: -v c="$1" '$2 == c { print $3 }' /proc/self/cgroup)"; }
MEMCG=$(cg_dir memory)
BLKCG=$(cg_dir blkio)
CELL=hdmlp-dist-cell-$$
for d in "$MEMCG" "$BLKCG"; do
    if ! { [ -w "$d" ] && mkdir "$d/$CELL.probe" 2>/dev/null && rmdir "$d/$CELL.probe"; }; then
        skip "cgroup v1 controller $d is not writable"
    fi
done
[ -w /proc/sys/vm/drop_caches ] || skip "cannot drop caches"

mkdir -p "$WORK" "$OUT/logs" || die "cannot create $WORK or $OUT"
WORK=$(cd "$WORK" && pwd)
OUT=$(cd "$OUT" && pwd)
SRCDEV=$(findmnt -no SOURCE --target "$WORK" | head -1)
[ -b "$SRCDEV" ] || skip "$WORK is not on a block device ($SRCDEV): blkio cannot throttle it"
PARENT=$(lsblk -no PKNAME "$SRCDEV" 2>/dev/null | head -1)
DISK=${PARENT:+/dev/$PARENT}
DISK=${DISK:-$SRCDEV}
DEV=$(lsblk -dno MAJ:MIN "$DISK" | tr -d ' ')
[ -n "$DEV" ] || skip "cannot find MAJ:MIN of $DISK"
log "work dir $WORK on $DISK ($DEV); output $OUT"

cleanup() {
    for d in "$MEMCG/$CELL" "$BLKCG/$CELL"; do
        [ -d "$d" ] && rmdir "$d" 2>/dev/null
    done
    if [ "$KEEP" = 0 ] && [ -n "${WORK:-}" ] && [ -d "$WORK" ]; then
        rm -rf "$WORK"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }

# cell_run TAG MEM_LIMIT BPS IOPS -- CMD...: CMD (and every process it starts) in a fresh
# cell after dropping caches; stdout to logs/TAG.out, stderr to logs/TAG.err; sets CELL_JSON.
cell_run() {
    local tag=$1 mem=$2 bps=$3 iops=$4
    shift 5
    local m=$MEMCG/$CELL b=$BLKCG/$CELL t0 t1 rc
    rmdir "$m" "$b" 2>/dev/null
    mkdir "$m" "$b" || die "cannot create cgroup $CELL"
    echo "$mem" >"$m/memory.limit_in_bytes" || die "cannot set memory limit"
    [ "$bps" -gt 0 ] && { echo "$DEV $bps" >"$b/blkio.throttle.read_bps_device" || die "cannot throttle $DEV"; }
    [ "$iops" -gt 0 ] && { echo "$DEV $iops" >"$b/blkio.throttle.read_iops_device" || die "cannot throttle $DEV"; }
    drop_caches
    prewarm
    t0=$(date +%s.%N)
    sh -c 'echo $$ >"$1/cgroup.procs" && echo $$ >"$2/cgroup.procs" && shift 2 && exec "$@"' \
        cell "$m" "$b" "$@" >"$OUT/logs/$tag.out" 2>"$OUT/logs/$tag.err"
    rc=$?
    t1=$(date +%s.%N)
    local peak dbytes dops oom
    peak=$(cat "$m/memory.max_usage_in_bytes")
    dbytes=$(awk -v d="$DEV" '$1 == d && $2 == "Read" { print $3 }' "$b/blkio.throttle.io_service_bytes")
    dops=$(awk -v d="$DEV" '$1 == d && $2 == "Read" { print $3 }' "$b/blkio.throttle.io_serviced")
    oom=$(awk '$1 == "oom_kill" { print $2 }' "$m/memory.oom_control")
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        rmdir "$m" "$b" 2>/dev/null && break
        sleep 0.3
    done
    CELL_JSON="{\"rc\": $rc, \"wall_seconds\": $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f", b - a }'), \"memory_limit\": $mem,"
    CELL_JSON+=" \"read_bps\": $bps, \"read_iops\": $iops, \"peak_memory\": ${peak:-0},"
    CELL_JSON+=" \"dev_read_bytes\": ${dbytes:-0}, \"dev_read_ops\": ${dops:-0}, \"oom_kills\": ${oom:-0}}"
    return $rc
}

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
PACK_SEED=7

T_START=$(date +%s)
gen() { # NAME COUNT MEAN SIGMA SEED
    local dir=$WORK/$1
    if [ -f "$dir/sizes.json" ] && grep -q "\"count\": $2," "$dir/sizes.json"; then
        return 0
    fi
    rm -rf "$dir"
    log "generating $1: $2 files, mean $3 B"
    "$PY" "$HERE/loader_gen.py" tree "$dir" --count "$2" --mean "$3" --sigma "$4" --seed "$5" ||
        die "cannot generate $1"
}
pack() { # NAME TREE K
    local dir=$WORK/$1 stamp
    stamp="$2 K=$3 seed=$PACK_SEED $(stat -c %Y "$WORK/$2/sizes.json")"
    if [ -f "$dir/index" ] && [ "$(cat "$WORK/$1.stamp" 2>/dev/null)" = "$stamp" ]; then
        return 0
    fi
    log "packing $1 (K=$3)"
    "$PACK" --chunk-size "$3" --seed $PACK_SEED --compress none --threads 2 --quiet --force \
        -o "$dir" "$WORK/$2/files" >"$OUT/logs/pack-$1.log" 2>&1 || die "hdmlp-pack failed for $1"
    echo "$stamp" >"$WORK/$1.stamp"
}
gen img "$COUNT" 112640 0.6 21
gen warmtree 64 4096 0 10
pack ds img $K
pack warm warmtree 4
RAW=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["bytes"])' "$WORK/img/sizes.json")
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
        res+=("$(grep '^{' "$f" 2>/dev/null | tail -1)")
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
{"date": "$(date -u +%FT%TZ)", "kernel": "$(uname -r)", "cpus": $(nproc), "device": "$DISK", "dev": "$DEV",
 "git": "$(git -C "$SRC" rev-parse --short HEAD 2>/dev/null || echo unknown)", "samples": $COUNT,
 "raw_bytes": $RAW, "k": $K, "batch": $BATCH, "epochs": $EPOCHS, "ranks": "$RANKS", "read_bps": $MB400,
 "read_iops": $IOPS_A, "allowance_per_process": $ALLOWANCE,
 "seconds": {"data": $((T_DATA - T_START)), "runs": $((T_END - T_DATA))}}
EOF
"$PY" "$HERE/dist_report.py" "$OUT" | tee "$OUT/table.txt" || die "report failed"
