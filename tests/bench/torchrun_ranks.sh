#!/bin/bash
# Local ranks the way PyTorch users run them: R rank processes of one host, each iterating
# hdmlp.torch.HdmlpIterableDataset through torch's DataLoader (num_workers W, persistent
# workers) with torch.distributed initialised (gloo), epochs kept in step by a barrier as
# DDP keeps them, the exchange through shared-memory rings (same_host='shm', the default)
# or loopback TCP (same_host='tcp'). The ranks are started with exactly the environment
# `torchrun --standalone --nproc-per-node R` gives them (RANK, LOCAL_RANK, WORLD_SIZE,
# LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT): Debian 12's torchrun (torch 1.13) fails
# before it starts any worker (AttributeError in torch.distributed.elastic's
# start_processes). Per R, W and path, REPEATS runs (the order of the paths alternates);
# medians: epoch seconds (the job's, epochs after the first), delivered MB/s, bytes received
# from peers and the part lent in shared memory, and with W = 0 (the loader runs in the
# rank process) CPU seconds per GB delivered (every rank's user + sys over the epochs);
# then shm/tcp ratios.
#
#   tests/bench/torchrun_ranks.sh [--build DIR] [--out DIR] [--work DIR] [--keep-data]
#                                 [--small] [--ranks "2 4"] [--workers "0 2"] [--count N]
#                                 [--epochs E] [--memory PCT] [--repeats N]
#
# Defaults: the dataset of local_ranks_bench.sh (20,000 samples, lognormal sizes with mean
# 24 KiB, K=16, uncompressed; read into the page cache first); 3 epochs; each rank's budget
# --memory (50) percent of its 1/R share, at least 48 MiB; batch 32; 3 repeats. --small:
# 4,000 samples, R = 2, W = 0, 2 epochs, 1 repeat. Needs torch and numpy for /usr/bin/python3
# and the built Python package (BUILD/python). Output: OUT/runs.jsonl, OUT/table.txt.
set -u
set -o pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
BENCH_NAME=torchrun_ranks
# shellcheck source-path=SCRIPTDIR source=bench_lib.sh
. "$HERE/bench_lib.sh"
OUT=$PWD/torchrun-ranks-out
WORK=${TMPDIR:-/var/tmp}/hdmlp-local-ranks-bench
RANKS="2 4"
WORKERS="0 2"
COUNT=20000
EPOCHS=3
MEMORY=50
REPEATS=3

while [ $# -gt 0 ]; do
    case $1 in
    --ranks) RANKS=${2:?}; shift 2 ;;
    --workers) WORKERS=${2:?}; shift 2 ;;
    --count) COUNT=${2:?}; shift 2 ;;
    --epochs) EPOCHS=${2:?}; shift 2 ;;
    --memory) MEMORY=${2:?}; shift 2 ;;
    --repeats) REPEATS=${2:?}; shift 2 ;;
    *) bench_option "$@"; shift "$BENCH_SHIFT" ;;
    esac
done
if [ "$SMALL" = 1 ]; then
    COUNT=4000 RANKS=2 WORKERS=0 EPOCHS=2 REPEATS=1
fi

bench_tools
export PYTHONPATH=$BUILD/python${PYTHONPATH:+:$PYTHONPATH}
"$PY" -c 'import torch, numpy, hdmlp.torch' 2>/dev/null ||
    skip "$PY cannot import torch, numpy and hdmlp.torch (from $BUILD/python)"
bench_dirs
bench_traps :
: >"$OUT/runs.jsonl"

local_ranks_data

# run NAME R W MODE: R ranks as torchrun starts them; each appends its JSON line.
run() {
    local name=$1 ranks=$2 workers=$3 mode=$4 pids=() rc=0 r budget port
    budget=$(rank_budget "$ranks")
    port=$(free_ports 1)
    for ((r = 0; r < ranks; r++)); do
        env RANK=$r LOCAL_RANK=$r WORLD_SIZE="$ranks" LOCAL_WORLD_SIZE="$ranks" GROUP_RANK=0 \
            MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" OMP_NUM_THREADS=1 \
            "$PY" "$HERE/torchrun_rank.py" "$WORK/ds" --memory "$budget" --same-host "$mode" \
            --workers "$workers" --epochs "$EPOCHS" --out "$OUT/runs.jsonl.$name" \
            >"$OUT/logs/$name.$r.out" 2>"$OUT/logs/$name.$r.err" &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || rc=1; done
    if [ $rc = 0 ]; then
        sed "s/^{/{\"run\": \"$name\", /" "$OUT/runs.jsonl.$name" >>"$OUT/runs.jsonl"
    else
        log "  $name FAILED: $(tail -q -n 2 "$OUT/logs/$name".*.err | tr '\n' ' ')"
    fi
    rm -f "$OUT/runs.jsonl.$name"
}

for R in $RANKS; do
    for W in $WORKERS; do
        for ((rep = 0; rep < REPEATS; rep++)); do
            modes="shm tcp"
            [ $((rep % 2)) = 1 ] && modes="tcp shm"
            for mode in $modes; do
                log "R$R-W$W-$mode-$rep: $R ranks, $W workers each, same_host=$mode"
                run "R$R-W$W-$mode-$rep" "$R" "$W" "$mode"
            done
        done
    done
done

"$PY" - "$OUT/runs.jsonl" "$RAW" "$MEMORY" "$COUNT" "$EPOCHS" >"$OUT/table.txt" <<'EOF'
import json, sys, statistics
rows = [json.loads(l) for l in open(sys.argv[1])]
raw, memory, count, epochs = int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])
print(f"hdmlp.torch local ranks (torchrun's environment, gloo, DataLoader): dataset "
      f"{raw / 2**20:.0f} MiB ({count} samples), {epochs} epochs, budget {memory} % of a "
      f"rank's share, batch 32; medians over repeats; epoch = the job's, after the first")
runs = {}
for r in rows:
    runs.setdefault(r["run"], []).append(r)
res = {}
for run in runs.values():
    key = (run[0]["world"], run[0]["workers"], run[0]["mode"])
    if len(run) == key[0]:
        later = [max(r["times"][e] for r in run) for e in range(1, epochs)] or \
            [max(r["times"][0] for r in run)]
        secs = sum(max(r["times"][e] for r in run) for e in range(epochs))
        dlv = sum(r["bytes"] for r in run)
        res.setdefault(key, []).append(dict(
            epoch=statistics.mean(later), mbps=dlv / secs / 1e6,
            cpu=sum(r["cpu_user"] + r["cpu_sys"] for r in run) / (dlv / 1e9),
            net=sum(r["net_bytes_in"] for r in run) / 2**20,
            lent=sum(r["net_bytes_lent"] for r in run) / 2**20))
med = {k: {f: statistics.median(x[f] for x in v) for f in v[0]} | {"n": len(v)}
       for k, v in res.items()}
print(f"{'ranks':>5} {'W':>2} {'path':<4} {'runs':>4} {'epoch s':>7} {'dlv MB/s':>8} "
      f"{'from peers MiB':>14} {'lent MiB':>8} {'CPU s/GB dlv':>12}")
for (ranks, w, mode), m in sorted(med.items()):
    cpu = f"{m['cpu']:>12.2f}" if w == 0 else f"{'-':>12}"
    print(f"{ranks:>5} {w:>2} {mode:<4} {m['n']:>4} {m['epoch']:>7.3f} {m['mbps']:>8.0f} "
          f"{m['net']:>14.0f} {m['lent']:>8.0f} {cpu}")
for (ranks, w) in sorted({(k[0], k[1]) for k in med}):
    s, t = med.get((ranks, w, "shm")), med.get((ranks, w, "tcp"))
    if s and t:
        cpu = f", CPU per GB {s['cpu'] / t['cpu']:.2f}x" if w == 0 else ""
        print(f"R={ranks} W={w}: shm/tcp throughput {s['mbps'] / t['mbps']:.2f}x, epoch time "
              f"{s['epoch'] / t['epoch']:.2f}x{cpu}")
EOF
cat "$OUT/table.txt"
