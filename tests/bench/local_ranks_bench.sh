#!/bin/bash
# Local ranks: the three same-host paths of hdmlp-bench --same-host: shm (shared-memory
# rings, the default for peers on this host), socket (gRPC over a Unix socket) and tcp
# (gRPC over loopback TCP), for R ranks on this machine joined with --peers on 127.0.0.1
# (issue 11, "Local ranks share memory, not sockets"). The dataset is read from the page
# cache (read once before the runs), so what differs between the paths is the exchange.
# Per R and path, REPEATS runs rotating the order of the paths; reported as medians:
# exchange throughput (bytes received from peers, all ranks, over the slowest rank's
# loading seconds), CPU seconds (user + sys of every rank process, /usr/bin/time) per GB
# received from peers and per GB delivered, epoch time; then shm/tcp, socket/tcp and
# shm/socket ratios. The goal of the issue: the same-host path >= 2x the throughput or
# <= 0.5x the CPU per GB of TCP. The transport alone: tests/bench/bench_transport.c.
#
#   tests/bench/local_ranks_bench.sh [--build DIR] [--out DIR] [--work DIR] [--keep-data]
#                                    [--small] [--ranks "2 4"] [--count N] [--epochs E]
#                                    [--memory PCT] [--repeats N]
#
# Defaults: 20,000 samples of lognormal sizes (mean 24 KiB, sigma 0.6: 90 % between 8 and
# 55 KiB; random bytes), packed K=16 uncompressed; 2 epochs; each rank's budget --memory
# (default 50) percent of its 1/R share of the dataset, at least 48 MiB; prefetch at its default; batch 32;
# 3 repeats. --small: 4,000 samples, 1 epoch, 1 repeat. No root needed. Needs /usr/bin/time
# and the built hdmlp-bench and hdmlp-pack (--build, default build/).
# Output: OUT/runs.jsonl (one line per rank and run), OUT/table.txt, OUT/logs/.
set -u
set -o pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
BENCH_NAME=local_ranks_bench
# shellcheck source-path=SCRIPTDIR source=bench_lib.sh
. "$HERE/bench_lib.sh"
OUT=$PWD/local-ranks-bench-out
WORK=${TMPDIR:-/var/tmp}/hdmlp-local-ranks-bench
RANKS="2 4"
COUNT=20000
EPOCHS=2
MEMORY=50
REPEATS=3

while [ $# -gt 0 ]; do
    case $1 in
    --ranks) RANKS=${2:?}; shift 2 ;;
    --count) COUNT=${2:?}; shift 2 ;;
    --epochs) EPOCHS=${2:?}; shift 2 ;;
    --memory) MEMORY=${2:?}; shift 2 ;;
    --repeats) REPEATS=${2:?}; shift 2 ;;
    *) bench_option "$@"; shift "$BENCH_SHIFT" ;;
    esac
done
if [ "$SMALL" = 1 ]; then
    COUNT=4000
    EPOCHS=1
    REPEATS=1
fi

[ -x /usr/bin/time ] || skip "needs /usr/bin/time (Debian package time)"
bench_tools
bench_need_option --same-host
bench_dirs
bench_traps :
: >"$OUT/runs.jsonl"

# ---- the dataset: read once so that the runs read it from the page cache ----------------
local_ranks_data

# run NAME R MODE REP: R ranks with --same-host MODE; one JSON line per rank, with the
# rank's CPU seconds (user, sys) and the run's wall seconds added.
run() {
    local name=$1 ranks=$2 mode=$3 rep=$4 pids=() rc=0 r list budget t0 t1 wall line
    list=$(peer_list "$ranks")
    budget=$(rank_budget "$ranks")
    t0=$(date +%s.%N)
    for ((r = 0; r < ranks; r++)); do
        /usr/bin/time -f '%U %S' -o "$OUT/logs/$name.$r.time" \
            "$BENCH" "$WORK/ds" --peers "$list" --rank "$r" --token 11 --same-host "$mode" \
            --memory "$budget" --batch 32 --epochs "$EPOCHS" --seed 1 \
            --peer-timeout 60000 --no-randomness --json --quiet \
            >"$OUT/logs/$name.$r.out" 2>"$OUT/logs/$name.$r.err" &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || rc=1; done
    t1=$(date +%s.%N)
    wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
    [ $rc = 0 ] || log "  $name FAILED: $(tail -q -n 2 "$OUT/logs/$name".*.err | tr '\n' ' ')"
    for ((r = 0; r < ranks; r++)); do
        line=$(grep '^{' "$OUT/logs/$name.$r.out" | tail -1)
        [ -n "$line" ] || continue
        echo "$line" | "$PY" -c '
import json, sys
d = json.load(sys.stdin)
u, s = (float(x) for x in open(sys.argv[5]).read().split()[-2:])
d.update(run=sys.argv[1], ranks=int(sys.argv[2]), mode=sys.argv[3], rep=int(sys.argv[4]),
         cpu_user=u, cpu_sys=s, wall=float(sys.argv[6]))
print(json.dumps(d))' "$name" "$ranks" "$mode" "$rep" "$OUT/logs/$name.$r.time" "$wall" \
            >>"$OUT/runs.jsonl" || true
    done
}

for R in $RANKS; do
    for ((rep = 0; rep < REPEATS; rep++)); do
        # rotate which path goes first, so that drift of the machine's load hits all three
        case $((rep % 3)) in
        0) modes="shm socket tcp" ;;
        1) modes="tcp shm socket" ;;
        *) modes="socket tcp shm" ;;
        esac
        for mode in $modes; do
            name=R$R-$mode-$rep
            log "$name: $R ranks, --same-host $mode, $EPOCHS epochs"
            run "$name" "$R" "$mode" "$rep"
        done
    done
done

"$PY" - "$OUT/runs.jsonl" "$RAW" "$MEMORY" "$COUNT" "$EPOCHS" >"$OUT/table.txt" <<'EOF'
import json, sys, statistics
rows = [json.loads(l) for l in open(sys.argv[1])]
raw, memory, count, epochs = int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
print(f"hdmlp local ranks: --peers on 127.0.0.1, dataset {raw / 2**20:.0f} MiB ({count} "
      f"samples, K=16), {epochs} epochs, budget {memory} % of a rank's share, batch 32; "
      f"medians over repeats")
runs = {}
for r in rows:
    runs.setdefault((r["ranks"], r["mode"], r["rep"]), []).append(r)
res = {}
for (ranks, mode, rep), rs in runs.items():
    if len(rs) != ranks:
        continue
    secs = max(r["seconds"] for r in rs)
    net = sum(r["net_bytes_in"] for r in rs)
    dlv = sum(r["bytes_delivered"] for r in rs)
    cpu = sum(r["cpu_user"] + r["cpu_sys"] for r in rs)
    res.setdefault((ranks, mode), []).append(dict(
        mbps=net / secs / 1e6, cpu_net=cpu / (net / 1e9), cpu_dlv=cpu / (dlv / 1e9),
        sys=sum(r["cpu_sys"] for r in rs) / (net / 1e9),
        epoch=secs / len(rs[0].get("epoch_seconds", [1])), remote=net / max(dlv, 1),
        same=sum(r.get("peers_same_host", 0) for r in rs), n=1))
med = {k: {f: statistics.median(x[f] for x in v) for f in v[0]} | {"n": len(v)}
       for k, v in res.items()}
print(f"{'ranks':>5} {'path':<6} {'runs':>4} {'exch MB/s':>9} {'CPU s/GB exch':>13} "
      f"{'sys s/GB':>8} {'CPU s/GB dlv':>12} {'epoch s':>7} {'remote':>6} {'same-host':>9}")
order = {"shm": 0, "socket": 1, "tcp": 2}
for (ranks, mode), m in sorted(med.items(), key=lambda kv: (kv[0][0], order.get(kv[0][1], 3))):
    print(f"{ranks:>5} {mode:<6} {m['n']:>4} {m['mbps']:>9.0f} {m['cpu_net']:>13.2f} "
          f"{m['sys']:>8.2f} {m['cpu_dlv']:>12.2f} {m['epoch']:>7.2f} {m['remote']:>6.0%} "
          f"{m['same']:>9.0f}")
for ranks in sorted({k[0] for k in med}):
    for a, b in (("shm", "tcp"), ("socket", "tcp"), ("shm", "socket")):
        s, t = med.get((ranks, a)), med.get((ranks, b))
        if s and t:
            goal = " (goal: >= 2x or <= 0.5x)" if b == "tcp" else ""
            print(f"R={ranks}: {a}/{b} throughput {s['mbps'] / t['mbps']:.2f}x, CPU per GB "
                  f"exchanged {s['cpu_net'] / t['cpu_net']:.2f}x, epoch time "
                  f"{s['epoch'] / t['epoch']:.2f}x{goal}")
EOF
cat "$OUT/table.txt"
