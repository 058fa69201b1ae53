#!/usr/bin/env bash
# workers_bench.sh: JPEG samples decoded and resized in DataLoader workers, one cold epoch,
# hdmlp.torch (one loader per rank, the data plane) against torchvision's ImageFolder over
# the same files, at W = 0, 2, 4 workers, in the benchmark cell (bench_lib.sh).
#
#   sudo tests/bench/workers_bench.sh [--build DIR] [--out DIR] [--work DIR] [--keep-data]
#                                     [--count 3000] [--workers "0 2 4"]
#
# Data: COUNT noise JPEGs of ~110 KB (270-330 px, quality 95) in 10 classes, packed with
# K = 64, uncompressed. Transform (both): PIL decode + resize to 64x64 (~2 ms a sample).
# Batch 32; hdmlp memory 25 %. Cell: memory limit 25 % of the data + 64 MiB + 1 GiB (the
# Python processes), caches dropped before every run. Regimes: A = 150 read ops/s +
# 400 MB/s, B = 400 MB/s. Source bytes: what the cell read from the disk. Writes
# OUT/results.jsonl and prints a table.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BENCH_NAME=workers_bench
. "$HERE/bench_lib.sh"
OUT=workers-bench-out
WORK=${TMPDIR:-/var/tmp}/hdmlp-workers-bench
COUNT=3000
WORKERS="0 2 4"
while [ $# -gt 0 ]; do
    case $1 in
    --count) COUNT=${2:?}; shift 2 ;;
    --workers) WORKERS=${2:?}; shift 2 ;;
    *) bench_option "$@"; shift "$BENCH_SHIFT" ;;
    esac
done
bench_need_root "cgroup cells, dropping caches"
bench_tools
bench_dirs
bench_traps :
cell_init "workers_bench$$"
cell_disk "$WORK"
"$PY" -c 'import torch, torchvision, PIL' 2>/dev/null || skip "needs torch, torchvision and PIL"
export PYTHONPATH="$BUILD/python${PYTHONPATH:+:$PYTHONPATH}"
DRIVER=$HERE/workers_bench.py

if [ ! -f "$WORK/jpeg.done" ] || [ "$(cat "$WORK/jpeg.done")" != "$COUNT" ]; then
    log "generating $COUNT JPEGs"
    rm -rf "$WORK/jpeg"
    "$PY" "$DRIVER" gen "$WORK/jpeg" --count "$COUNT" || die "cannot generate the JPEGs"
    echo "$COUNT" >"$WORK/jpeg.done"
fi
pack jpeg_ds "$WORK/jpeg" 64
bytes=$(du -sb "$WORK/jpeg" | cut -f1)
mem=$((bytes / 4 + 64 * 1024 * 1024 + 1024 * 1024 * 1024))
prewarm() { "$PY" -c 'import torch, torchvision, hdmlp.torch' >/dev/null 2>&1; }

RES=$OUT/results.jsonl
: >"$RES"
for regime in A B; do
    iops=0
    [ "$regime" = A ] && iops=150
    for w in $WORKERS; do
        for who in hdmlp imagefolder; do
            src=$WORK/jpeg_ds
            [ "$who" = imagefolder ] && src=$WORK/jpeg
            log "$regime W=$w $who (load $(loadavg))"
            cell_run "$regime-$w-$who" "$mem" 400000000 "$iops" -- \
                "$PY" "$DRIVER" "$who" "$src" --workers "$w" --batch 32 --memory 25%
            echo "{\"regime\": \"$regime\", \"workers\": $w, \"who\": \"$who\", \"cell\": $CELL_JSON, \"result\": $(last_json "$OUT/logs/$regime-$w-$who.out" || echo null)}" >>"$RES"
        done
    done
done

"$PY" - "$RES" <<'PY' | tee "$OUT/table.txt"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
get = {(r["regime"], r["workers"], r["who"]): r for r in rows}
print(f"{'regime':>6} {'W':>2} {'hdmlp s':>8} {'ImageFolder s':>13} {'speed-up':>8} "
      f"{'hdmlp MB read':>13} {'vs W=0':>7} {'IF MB read':>10} {'hdmlp samples/s':>15}")
ok = True
for regime in ("A", "B"):
    base = None
    for w in sorted({r["workers"] for r in rows}):
        h, i = get.get((regime, w, "hdmlp")), get.get((regime, w, "imagefolder"))
        if not h or not i or h["cell"]["rc"] or i["cell"]["rc"] or not h["result"]:
            print(f"{regime:>6} {w:>2} failed (see logs)")
            ok = False
            continue
        hs, is_ = h["result"]["wall"], i["result"]["wall"]
        hb, ib = h["cell"]["dev_read_bytes"], i["cell"]["dev_read_bytes"]
        base = base or hb
        print(f"{regime:>6} {w:>2} {hs:>8.2f} {is_:>13.2f} {is_ / hs:>7.2f}x {hb / 1e6:>13.1f} "
              f"{hb / base:>6.2f}x {ib / 1e6:>10.1f} {h['result']['samples'] / hs:>15,.0f}")
print("goals: hdmlp source bytes at every W <= 1.05x W=0; regime A speed-up >= 2.5x at every W")
sys.exit(0 if ok else 1)
PY
