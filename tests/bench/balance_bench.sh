#!/bin/bash
# Per-GPU balance across local ranks (issue 11 item 4): hdmlp-bench --node-board on vs off
# for R ranks on this machine joined with --peers on 127.0.0.1, where rank 0's consumer is
# slower (--compute-ms SLOW per batch) than the others' (FAST): rank 0 runs ahead of its
# consumer while the others wait for data. With the board, a rank at least two batches
# ahead that did not stall holds back (half its I/O threads, lends its unused lookahead
# memory) while another rank stalls, and the most-starved rank may borrow that memory.
# Reads are O_DIRECT (--direct) so they reach the disk; as root with writable cgroup v1
# controllers all ranks run in one cell (bench_lib.sh) whose reads are throttled to
# --bps bytes/s (the node's shared device), else unthrottled (noted in the table).
# Per R, REPEATS runs alternating which mode goes first; reported as medians: each rank's
# stall seconds, the slowest rank's stall, the job's epoch time (slowest rank's seconds /
# epochs), the node's max/min stall ratio, `idle %` (the share of all ranks' balance
# windows in which a rank did not wait and had two batches or more ready while another
# local rank waited: idle prefetch beside a stall, board_idle_windows); then on/off
# ratios. Goal: the slowest rank's
# stall and the job's epoch time lower with the board, no rank worse beyond noise.
#
#   tests/bench/balance_bench.sh [--build DIR] [--out DIR] [--work DIR] [--keep-data]
#                                [--small] [--ranks "2 4"] [--count N] [--epochs E]
#                                [--memory PCT] [--repeats N] [--slow MS] [--fast MS]
#                                [--bps BYTES_PER_S] [--threads T]
#
# Defaults: 12,000 samples of lognormal sizes (mean 24 KiB, sigma 0.6), packed K=16
# uncompressed; 1 epoch; each rank's budget --memory (default 25) percent of its 1/R share,
# at least 48 MiB; batch 32; --slow 30, --fast 2 ms per batch; 4 I/O threads; throttle
# 60 MB/s; 3 repeats. --small: 4,000 samples, 1 repeat. Needs the built hdmlp-bench and
# hdmlp-pack (--build, default build/).
# Output: OUT/runs.jsonl (one line per rank and run), OUT/table.txt, OUT/logs/.
set -u
set -o pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
BENCH_NAME=balance_bench
# shellcheck source-path=SCRIPTDIR source=bench_lib.sh
. "$HERE/bench_lib.sh"
OUT=$PWD/balance-bench-out
WORK=${TMPDIR:-/var/tmp}/hdmlp-balance-bench
RANKS="2 4"
COUNT=12000
EPOCHS=1
MEMORY=25
REPEATS=3
SLOW=30
FAST=2
BPS=60000000
THREADS=4

while [ $# -gt 0 ]; do
    case $1 in
    --ranks) RANKS=${2:?}; shift 2 ;;
    --count) COUNT=${2:?}; shift 2 ;;
    --epochs) EPOCHS=${2:?}; shift 2 ;;
    --memory) MEMORY=${2:?}; shift 2 ;;
    --repeats) REPEATS=${2:?}; shift 2 ;;
    --slow) SLOW=${2:?}; shift 2 ;;
    --fast) FAST=${2:?}; shift 2 ;;
    --bps) BPS=${2:?}; shift 2 ;;
    --threads) THREADS=${2:?}; shift 2 ;;
    *) bench_option "$@"; shift "$BENCH_SHIFT" ;;
    esac
done
if [ "$SMALL" = 1 ]; then
    COUNT=4000
    REPEATS=1
fi

bench_tools
bench_need_option --node-board
bench_dirs
bench_traps cell_remove
: >"$OUT/runs.jsonl"

gen_tree tree "$COUNT" 24576 0.6 23
pack ds "$WORK/tree/files" 16
RAW=$(du -sb "$WORK/ds" | cut -f1)

# The cell, when this machine allows one (root, writable cgroup v1 controllers).
CELLED=0
if [ "$(id -u)" = 0 ] && [ -w "$(cg_dir blkio)" ] && [ -w "$(cg_dir memory)" ] &&
    [ -w /proc/sys/vm/drop_caches ]; then
    CELLED=1
    cell_init "balance$$"
    cell_disk "$WORK/ds"
fi
prewarm() { "$BENCH" --help >/dev/null 2>&1 || true; }

# The ranks of one run, started together (inside the cell when there is one).
cat >"$OUT/launch.sh" <<'EOF'
#!/bin/bash
# launch.sh BENCH DS PEERS R BOARD BUDGET EPOCHS SLOW FAST THREADS LOGPREFIX
bench=$1 ds=$2 peers=$3 ranks=$4 board=$5 budget=$6 epochs=$7 slow=$8 fast=$9
threads=${10} log=${11}
pids=()
for ((r = 0; r < ranks; r++)); do
    ms=$fast
    [ "$r" = 0 ] && ms=$slow
    nice -n 5 "$bench" "$ds" --peers "$peers" --rank "$r" --token 13 --node-board "$board" \
        --memory "$budget" --batch 32 --epochs "$epochs" --seed 1 --threads "$threads" \
        --direct --compute-ms "$ms" --peer-timeout 60000 --no-randomness --json --quiet \
        >"$log.$r.out" 2>"$log.$r.err" &
    pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
exit $rc
EOF
chmod +x "$OUT/launch.sh"

run() {
    local name=$1 ranks=$2 board=$3 rep=$4 list budget rc=0 r line
    list=$(peer_list "$ranks")
    budget=$(rank_budget "$ranks")
    local args=("$OUT/launch.sh" "$BENCH" "$WORK/ds" "$list" "$ranks" "$board" "$budget"
        "$EPOCHS" "$SLOW" "$FAST" "$THREADS" "$OUT/logs/$name")
    if [ "$CELLED" = 1 ]; then
        cell_run "$name" $((8 << 30)) "$BPS" 0 -- "${args[@]}" || rc=1
    else
        "${args[@]}" >"$OUT/logs/$name.out" 2>"$OUT/logs/$name.err" || rc=1
    fi
    [ $rc = 0 ] || log "  $name FAILED: $(tail -q -n 2 "$OUT/logs/$name".*.err | tr '\n' ' ')"
    for ((r = 0; r < ranks; r++)); do
        line=$(grep '^{' "$OUT/logs/$name.$r.out" | tail -1)
        [ -n "$line" ] || continue
        echo "$line" | "$PY" -c '
import json, sys
d = json.load(sys.stdin)
d.update(run=sys.argv[1], ranks=int(sys.argv[2]), board=sys.argv[3], rep=int(sys.argv[4]),
         celled=int(sys.argv[5]))
print(json.dumps(d))' "$name" "$ranks" "$board" "$rep" "$CELLED" >>"$OUT/runs.jsonl" || true
    done
}

for R in $RANKS; do
    for ((rep = 0; rep < REPEATS; rep++)); do
        modes="on off"
        [ $((rep % 2)) = 1 ] && modes="off on"
        for board in $modes; do
            name=R$R-$board-$rep
            log "$name: $R ranks, --node-board $board, rank 0 ${SLOW} ms/batch, others ${FAST}"
            run "$name" "$R" "$board" "$rep"
        done
    done
done

"$PY" - "$OUT/runs.jsonl" "$RAW" "$MEMORY" "$COUNT" "$EPOCHS" "$SLOW" "$FAST" "$BPS" \
    "$CELLED" >"$OUT/table.txt" <<'EOF'
import json, sys, statistics
rows = [json.loads(l) for l in open(sys.argv[1])]
raw, memory, count, epochs, slow, fast, bps, celled = sys.argv[2:10]
cell = f"reads throttled to {int(bps) / 1e6:.0f} MB/s in one cell" if celled == "1" else \
    "NOT throttled (no cell: needs root and cgroup v1)"
print(f"hdmlp per-GPU balance: --peers on 127.0.0.1, dataset {int(raw) / 2**20:.0f} MiB "
      f"({count} samples, K=16), {epochs} epoch(s), budget {memory} % of a rank's share, "
      f"batch 32, O_DIRECT, {cell}; rank 0 computes {slow} ms per batch, the others {fast}; "
      f"medians over repeats")
runs = {}
for r in rows:
    runs.setdefault((r["ranks"], r["board"], r["rep"]), []).append(r)
res = {}
for (ranks, board, rep), rs in runs.items():
    if len(rs) != ranks or any(r.get("status", 0) for r in rs):
        continue
    rs.sort(key=lambda r: r["rank"])
    stalls = [r["stall_seconds"] for r in rs]
    res.setdefault((ranks, board), []).append(dict(
        epoch=max(r["seconds"] for r in rs) / int(epochs), worst=max(stalls),
        ratio=max(stalls) / min(stalls) if min(stalls) > 0 else float("nan"),
        stalls=stalls, holds=sum(r.get("board_hold_windows", 0) for r in rs),
        starved=sum(r.get("board_starved_windows", 0) for r in rs),
        idle=sum(r.get("board_idle_windows", 0) for r in rs) /
        max(sum(r.get("board_windows", 0) for r in rs), 1),
        borrowed=max(r.get("board_borrowed_peak", 0) for r in rs)))
med = {}
for k, v in res.items():
    med[k] = {f: statistics.median(x[f] for x in v) for f in ("epoch", "worst", "ratio",
                                                                "holds", "starved", "idle",
                                                                "borrowed")}
    med[k]["stalls"] = [statistics.median(x["stalls"][i] for x in v)
                        for i in range(len(v[0]["stalls"]))]
    med[k]["n"] = len(v)
print(f"{'ranks':>5} {'board':<5} {'runs':>4} {'epoch s':>8} {'worst stall s':>13} "
      f"{'max/min':>7} {'holds':>6} {'starved':>7} {'idle %':>6} {'borrow MiB':>10}  "
      f"per-rank stall s")
for (ranks, board), m in sorted(med.items()):
    print(f"{ranks:>5} {board:<5} {m['n']:>4} {m['epoch']:>8.2f} {m['worst']:>13.2f} "
          f"{m['ratio']:>7.2f} {m['holds']:>6.0f} {m['starved']:>7.0f} {m['idle']:>6.1%} "
          f"{m['borrowed'] / 2**20:>10.1f}  " + " ".join(f"{s:.2f}" for s in m["stalls"]))
for ranks in sorted({k[0] for k in med}):
    on, off = med.get((ranks, "on")), med.get((ranks, "off"))
    if on and off:
        worse = [i for i, (a, b) in enumerate(zip(on["stalls"], off["stalls"])) if a > b * 1.1 + 0.05]
        print(f"R={ranks}: on/off epoch time {on['epoch'] / off['epoch']:.2f}x, slowest rank's "
              f"stall {on['worst'] / max(off['worst'], 1e-9):.2f}x; ranks whose stall grew "
              f">10 % + 0.05 s: {worse or 'none'}")
EOF
cat "$OUT/table.txt"
