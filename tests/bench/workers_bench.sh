#!/usr/bin/env bash
# workers_bench.sh: JPEGs decoded and resized in DataLoader workers, one cold epoch,
# hdmlp.torch (one loader per rank: the data plane) against torchvision's ImageFolder over
# the original files, at W = 0, 2, 4 workers, in the benchmark cell (bench_lib.sh).
#
#   sudo tests/bench/workers_bench.sh [--build DIR] [--out DIR] [--work DIR] [--keep-data]
#                                     [--count 3000] [--workers "0 2 4"] [--repeat 2]
#                                     [--no-fixed] [--small]
#
# Data: COUNT noise JPEGs (276-336 px, quality 95, mean ~110 KiB) in 10 class folders,
# packed with K = 64, uncompressed (--small: 1,500 files, 1 round). Transform (the same
# function for both, in the workers): PIL decode + resize to 64x64 + to_tensor. Batch 32;
# hdmlp memory 25 % of the raw bytes, cost model learnt (defaults); unless --no-fixed also
# "hdmlp-fixed": the same with the regime's true cost model (storage_cost), whose plans do
# not depend on timings, so its bytes show what W alone does.
# Cell: memory limit = 25 % of the raw bytes + 64 MiB + PY(contender, W), PY being the
# Python processes' own memory (main, workers, data plane) beside hdmlp's budget: the peak
# anonymous + shared memory of the same contender and W on a 200-file warm set, measured
# first in an unthrottled, unlimited cell, minus the loader's peak, + 32 MiB. So each
# contender's page cache can hold about 25 % of the data + ~96 MiB (ImageFolder) or ~96 MiB
# beside hdmlp's 25 % budget, as with the C programs of the other benchmarks.
# Caches dropped before every run; the same contender pre-warmed outside the cell on the
# warm set (Python modules, libraries). Regimes: A = 150 read ops/s + 400 MB/s,
# B = 400 MB/s. Source bytes: what the cell read from the disk (blkio; all processes of the
# cell: main, workers, data plane) and, for hdmlp, ds.stats()["bytes_read"].
# Every configuration runs --repeat times (rounds); the table shows medians.
# Writes OUT/results.jsonl, OUT/table.txt (workers_report.py re-renders it).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BENCH_NAME=workers_bench
# shellcheck source-path=SCRIPTDIR source=bench_lib.sh
. "$HERE/bench_lib.sh"
OUT=workers-bench-out
WORK=${TMPDIR:-/var/tmp}/hdmlp-workers-bench
COUNT=3000
WORKERS="0 2 4"
REPEAT=2
FIXED=1
while [ $# -gt 0 ]; do
    case $1 in
    --count) COUNT=${2:?}; shift 2 ;;
    --workers) WORKERS=${2:?}; shift 2 ;;
    --repeat) REPEAT=${2:?}; shift 2 ;;
    --no-fixed) FIXED=0; shift ;;
    *) bench_option "$@"; shift "$BENCH_SHIFT" ;;
    esac
done
if [ "$SMALL" = 1 ]; then COUNT=1500; REPEAT=1; fi
bench_need_root "cgroup cells, dropping caches"
bench_tools
bench_dirs
bench_traps :
cell_init "workers_bench$$"
cell_disk "$WORK"
"$PY" -c 'import torch, torchvision, PIL' 2>/dev/null || skip "needs torch, torchvision and PIL"
export PYTHONPATH="$BUILD/python${PYTHONPATH:+:$PYTHONPATH}"
"$PY" -c 'import hdmlp.torch' 2>/dev/null || die "$PY cannot import hdmlp.torch from $BUILD/python"
DRIVER=$HERE/workers_bench.py
DRIVE=("$PY" -W ignore::UserWarning "$DRIVER")

# jpegs NAME COUNT SEED: WORK/NAME, COUNT JPEGs (kept while COUNT and SEED are the same)
jpegs() {
    local dir=$WORK/$1
    [ "$(cat "$dir.done" 2>/dev/null)" = "$2 $3" ] && return 0
    log "generating $1: $2 JPEGs"
    rm -rf "$dir"
    "${DRIVE[@]}" gen "$dir" --count "$2" --seed "$3" >"$dir.json" ||
        die "cannot generate the JPEGs"
    echo "$2 $3" >"$dir.done"
}
jpegs warm 200 99
jpegs jpeg "$COUNT" 7
pack warm_ds "$WORK/warm" 64
pack jpeg_ds "$WORK/jpeg" 64
bytes=$(find "$WORK/jpeg" -type f -name '*.jpg' -printf '%s\n' | awk '{ s += $1 } END { print s }')

# prewarm CMD...: the same contender and W on the warm set, outside the cell
prewarm() {
    local mode=$5 w=0
    while [ $# -gt 1 ]; do
        [ "$1" = --workers ] && w=$2
        shift
    done
    case $mode in
    hdmlp) "${DRIVE[@]}" hdmlp "$WORK/warm_ds" --workers "$w" --memory 64M ;;
    *) "${DRIVE[@]}" imagefolder "$WORK/warm" --workers "$w" ;;
    esac >/dev/null 2>&1
}

# PY(WHO, W): the contender's own memory at W workers beside hdmlp's budget, measured on the
# warm set in an unthrottled, unlimited cell: peak anonymous + shared memory of the cell,
# minus the loader's peak (hdmlp), + 32 MiB
declare -A PYMEM
for w in $WORKERS; do
    for who in hdmlp imagefolder; do
        case $who in
        hdmlp) args=(hdmlp "$WORK/warm_ds" --memory 64M) ;;
        *) args=(imagefolder "$WORK/warm") ;;
        esac
        cell_run "calibrate-$who-$w" $((8 * 1024 * 1024 * 1024)) 0 0 -- \
            "${DRIVE[@]}" "${args[@]}" --workers "$w" ||
            die "calibration run $who W=$w failed: $(tail -3 "$OUT/logs/calibrate-$who-$w.err")"
        own=$("$PY" -c 'import json, sys; r = json.loads(sys.argv[1])
print(r["cell_memory"]["rss_shmem"] - (r.get("peak_memory_bytes") or 0))' \
            "$(last_json "$OUT/logs/calibrate-$who-$w.out")") || die "no calibration result"
        PYMEM[$who-$w]=$((own + 32 * 1024 * 1024))
        log "W=$w $who: Python processes $((own >> 20)) MiB beside the loader's budget"
    done
done

RES=$OUT/results.jsonl
: >"$RES"
echo "{\"meta\": {$(meta_host), \"rev\": \"$(git_rev)\", \"count\": $COUNT, \"raw_bytes\": $bytes, \"repeat\": $REPEAT, \"gen\": $(cat "$WORK/jpeg.json" 2>/dev/null || echo null)}}" >>"$RES"
WHO="hdmlp imagefolder"
[ "$FIXED" = 1 ] && WHO="hdmlp imagefolder hdmlp-fixed"
for round in $(seq 1 "$REPEAT"); do
    for regime in A B; do
        iops=0 op=100
        [ "$regime" = A ] && iops=150 op=6667
        for w in $WORKERS; do
            for who in $WHO; do
                mem=$((bytes / 4 + 64 * 1024 * 1024 + PYMEM[${who%-fixed}-$w]))
                case $who in
                hdmlp) args=(hdmlp "$WORK/jpeg_ds") ;;
                hdmlp-fixed) args=(hdmlp "$WORK/jpeg_ds" --storage-cost "$op,400000000") ;;
                imagefolder) args=(imagefolder "$WORK/jpeg") ;;
                esac
                tag=$regime-$w-$who-$round
                log "round $round/$REPEAT: $regime W=$w $who (load $(loadavg))"
                cell_run "$tag" "$mem" 400000000 "$iops" -- \
                    "${DRIVE[@]}" "${args[@]}" --workers "$w" --batch 32 --memory 25%
                echo "{\"regime\": \"$regime\", \"workers\": $w, \"who\": \"$who\", \"round\": $round, \"load\": \"$(loadavg)\", \"cell\": $CELL_JSON, \"result\": $(last_json "$OUT/logs/$tag.out" || echo null)}" >>"$RES"
            done
        done
    done
done
"$PY" "$HERE/workers_report.py" "$RES" | tee "$OUT/table.txt"
