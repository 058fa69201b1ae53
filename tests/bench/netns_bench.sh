#!/bin/bash
# Distributed loading across network namespaces (issue 5, optional variant): R ranks, each in
# its own network namespace, joined by veth pairs to a bridge in a switch namespace; every
# rank's link is capped with tc (tbf rate; netem delay optional), so the exchange goes over real TCP
# with a real bandwidth limit instead of loopback. The dataset is read from the local disk
# (page cache), so the links are the bottleneck being measured. Per link rate: prefetch on
# (window 256) vs off, epoch time, remote requests, bytes received per rank, and the
# exchange's share of the link (received bytes / epoch time / rate).
#
#   tests/bench/netns_bench.sh [--build DIR] [--out DIR] [--work DIR] [--keep-data]
#                              [--ranks R] [--rates "100mbit 1gbit"] [--delay MS]
#                              [--count N] [--epochs E] [--memory SIZE]
#
# Needs root, iproute2 (ip, tc with tbf/netem), /usr/bin/python3, the built hdmlp-bench and
# hdmlp-pack (--build, default build/). Else: SKIP, exit 0. Leaves no namespace behind.
# Output: OUT/runs.jsonl (one line per rank and run), OUT/table.txt, OUT/logs/.
set -u
set -o pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
BENCH_NAME=netns_bench
# shellcheck source-path=SCRIPTDIR source=bench_lib.sh
. "$HERE/bench_lib.sh"
OUT=$PWD/netns-bench-out
WORK=${TMPDIR:-/var/tmp}/hdmlp-netns-bench
RANKS=3
RATES="100mbit 1gbit"
DELAY=0
COUNT=3000
EPOCHS=2
MEMORY=25%
PORT=47100
NS=hdnb # namespace prefix

while [ $# -gt 0 ]; do
    case $1 in
    --ranks) RANKS=${2:?}; shift 2 ;;
    --rates) RATES=${2:?}; shift 2 ;;
    --delay) DELAY=${2:?}; shift 2 ;;
    --count) COUNT=${2:?}; shift 2 ;;
    --epochs) EPOCHS=${2:?}; shift 2 ;;
    --memory) MEMORY=${2:?}; shift 2 ;;
    *) bench_option "$@"; shift "$BENCH_SHIFT" ;;
    esac
done

bench_need_root "network namespaces"
command -v ip >/dev/null && command -v tc >/dev/null || skip "needs iproute2 (ip, tc)"
bench_tools
[ "$RANKS" -ge 2 ] || die "--ranks must be >= 2"
bench_dirs
: >"$OUT/runs.jsonl"

remove_namespaces() {
    for ((r = 0; r < RANKS; r++)); do ip netns del "$NS$r" 2>/dev/null; done
    ip netns del "${NS}sw" 2>/dev/null
    return 0
}
bench_traps remove_namespaces
remove_namespaces

# ---- the network: switch namespace with a bridge, one namespace and veth pair per rank ----
ip netns add "${NS}sw" || skip "cannot create network namespaces here"
ip -n "${NS}sw" link add br0 type bridge
ip -n "${NS}sw" link set br0 up
PEERS=""
for ((r = 0; r < RANKS; r++)); do
    ns=$NS$r
    ip netns add "$ns"
    ip link add "hdnb$r" netns "$ns" type veth peer name "p$r" netns "${NS}sw"
    ip -n "${NS}sw" link set "p$r" master br0 up
    ip -n "$ns" addr add "10.77.0.$((r + 1))/24" dev "hdnb$r"
    ip -n "$ns" link set "hdnb$r" up
    ip -n "$ns" link set lo up
    PEERS="$PEERS${PEERS:+,}10.77.0.$((r + 1)):$((PORT + r))"
done

# shape: caps every rank's link in both directions (each rank's veth end shapes what it
# sends, the switch end what it receives) with tbf at RATE, plus netem DELAY when asked.
shape() {
    for ((r = 0; r < RANKS; r++)); do
        for side in "$NS$r hdnb$r" "${NS}sw p$r"; do
            set -- $side
            tc -n "$1" qdisc del dev "$2" root 2>/dev/null
            tc -n "$1" qdisc add dev "$2" root handle 1: tbf rate "$RATE" burst 256kb \
                latency 50ms || die "tc tbf failed on $2"
            if [ "$DELAY" != 0 ]; then
                tc -n "$1" qdisc add dev "$2" parent 1:1 handle 10: netem delay "${DELAY}ms" ||
                    die "tc netem failed on $2 (no sch_netem in this kernel? use --delay 0)"
            fi
        done
    done
}

# ---- the dataset: ~110 KiB samples (like ImageNet), packed K=64, read from the page cache --
gen_tree tree "$COUNT" 112640 0.6 21
pack ds "$WORK/tree/files" 64
cat "$WORK/ds"/* >/dev/null
RAW=$(du -sb "$WORK/ds" | cut -f1)

# run NAME PREFETCH: all ranks, each in its namespace; one JSON line per rank.
run() {
    local name=$1 prefetch=$2 pids=() rc=0 line
    for ((r = 0; r < RANKS; r++)); do
        ip netns exec "$NS$r" "$BENCH" "$WORK/ds" --peers "$PEERS" --rank "$r" --token 77 \
            --memory "$MEMORY" --batch 32 --epochs "$EPOCHS" --seed 1 --prefetch "$prefetch" \
            --peer-timeout 30000 --no-randomness --json --quiet \
            >"$OUT/logs/$name.$r.out" 2>"$OUT/logs/$name.$r.err" &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || rc=1; done
    [ $rc = 0 ] || log "  $name FAILED: $(tail -q -n 2 "$OUT/logs/$name".*.err | tr '\n' ' ')"
    for ((r = 0; r < RANKS; r++)); do
        line=$(grep '^{' "$OUT/logs/$name.$r.out" | tail -1)
        [ -n "$line" ] || continue
        echo "$line" | "$PY" -c 'import json,sys; d=json.load(sys.stdin); d.update(run=sys.argv[1], rank=int(sys.argv[2]), rate=sys.argv[3], prefetch=int(sys.argv[4])); print(json.dumps(d))' \
                "$name" "$r" "$RATE" "$prefetch" >>"$OUT/runs.jsonl" || true
    done
}

for RATE in $RATES; do
    shape
    for prefetch in 256 0; do
        name=$RATE-p$prefetch
        log "$name: $RANKS ranks, link $RATE (delay ${DELAY} ms), $EPOCHS epochs"
        run "$name" "$prefetch"
    done
done

"$PY" - "$OUT/runs.jsonl" "$RANKS" "$RAW" "$DELAY" "$MEMORY" >"$OUT/table.txt" <<'EOF'
import json, sys, statistics
rows = [json.loads(l) for l in open(sys.argv[1])]
ranks, raw, delay, memory = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
def bits(rate):
    n, u = float(rate.rstrip("bitkmg")), rate.lower().rstrip("bit")[-1]
    return n * {"k": 1e3, "m": 1e6, "g": 1e9}.get(u, 1)
print(f"hdmlp netns benchmark: {ranks} ranks in network namespaces, veth + bridge, tbf rate "
      f"per link direction, netem delay {delay} ms; dataset {raw / 2**20:.0f} MiB, K=64, "
      f"memory {memory} per rank, batch 32")
print(f"{'run':<14} {'epoch s (slowest rank)':<24} {'remote requests':>15} "
      f"{'MB in per rank':>14} {'link use':>8} {'prefetched':>10}")
for run in dict.fromkeys(r["run"] for r in rows):
    rs = [r for r in rows if r["run"] == run]
    if len(rs) != ranks:
        print(f"{run:<14} FAILED ({len(rs)} of {ranks} ranks reported)")
        continue
    epochs = [max(r["epoch_seconds"][e] for r in rs) for e in range(len(rs[0]["epoch_seconds"]))]
    req = sum(r["remote_requests"] for r in rs)
    mb_in = statistics.mean(r["net_bytes_in"] for r in rs) / 1e6
    secs = max(r["seconds"] for r in rs)
    use = mb_in * 8e6 / secs / bits(rs[0]["rate"])
    pre = sum(r["prefetch_sent"] for r in rs)
    print(f"{run:<14} {' '.join(f'{e:.2f}' for e in epochs):<24} {req:>15} {mb_in:>14.0f} "
          f"{use:>7.0%} {pre:>10}")
EOF
cat "$OUT/table.txt"
