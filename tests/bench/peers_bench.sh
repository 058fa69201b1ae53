#!/usr/bin/env bash
# peers_bench.sh: hdmlp side by side with its peers (issue 23 item 4) in ONE run in the
# benchmark cell: the shard-streaming recipe (WebDataset's; shard_recipe.py: the webdataset
# package when importable, else the same recipe with tarfile), per-file reads
# (loader_perfile.c, 2 threads), hdmlp-bench --order strict (policy auto, and fill-rate) /
# pool / pool --pool-reads R,
# and hdmlp.torch with 2 DataLoader workers, order 'strict' and 'pool'.
#
#   sudo tests/bench/peers_bench.sh [--build DIR] [--out DIR] [--work DIR] [--keep-data]
#                                   [--small] [--count 8000] [--memory 25] [--rounds 2]
#                                   [--regimes "A B"] [--pool-reads "1 2 4 8"]
#                                   [--fig-epochs 4] [--batch 32] [--py-margin 128]
#                                   [--webdataset-src DIR] [--contenders "NAME ..."]
#
# Data: COUNT files (default 8,000; --small 1,500) of lognormal sizes, mean 110,000 B
# (sigma 0.6), in 100 class folders (loader_gen.py; --small: batch 8), packed with hdmlp-pack K = 64
# (seed 7, uncompressed) and written as tar shards by shard_recipe.py (min(64 MiB, 1/16 of
# the data) a shard, samples in a seeded shuffled order). Every contender reads the data at
# batch 32 with MEMORY % of the data's bytes as its budget (the recipe: its shuffle buffers
# in total).
# Cell (bench_lib.sh): memory limit = MEMORY % of the data + 64 MiB + the contender's own
# processes (Python contenders: the cell's peak on a 200-file warm set in an unlimited cell,
# less the loader's budget in use or the shuffle buffers, hdmlp.torch's shared arena resized
# to the full data set's largest samples, + PY_MARGIN MiB (128: a full epoch's 250 batches
# through the main process grow its heap beyond the warm set's; with 32 MiB hdmlp.torch
# strict was OOM-killed), measured first; C programs: 0), so every contender has the same room for data
# and page cache; read throttle of the data's disk: regime A = 150 read ops/s + 400 MB/s,
# B = 400 MB/s. Before each run caches are dropped and the same contender runs once
# outside the cell on the warm set (programs and Python modules cached, data cold); a
# throwaway read settles the throttle at each regime's start. Each run is ONE cold epoch
# (epoch 0): later epochs of a process holding page cache are not comparable.
# Randomness: the four figures of order_figures.py (same-chunk distance, epoch-position
# correlation, Spearman against storage order, storage-neighbour fraction) over FIG_EPOCHS
# epochs of each contender's delivered order, from runs outside the cell (warm: the order
# does not depend on storage speed; each cell run's epoch 0 is compared with it): hdmlp-bench
# --ids, the indices hdmlp.torch delivers, the positions the recipe logs, and for per-file
# reads the order loader_perfile requests (seed 1 + epoch: one run per epoch).
# --webdataset-src DIR (a directory holding the webdataset package, e.g. its source tree's
# src/, with braceexpand and yaml importable) adds "recipe-wds": the same recipe through
# the webdataset package itself (shard_recipe.py --impl webdataset with DIR on PYTHONPATH).
# The run uses a snapshot of the build taken at its start (WORK/snapshot: hdmlp-bench,
# hdmlp-pack, libhdmlp through LD_LIBRARY_PATH, the Python package), so that other builds
# into the same tree do not mix versions; OUT/build_check.json has its checksum.
# Writes OUT/results.jsonl, OUT/results.json, OUT/table.md, OUT/frontier.png (gnuplot),
# OUT/orders/*.ids, OUT/logs/ (peers_report.py OUT re-renders). Needs root and writable
# cgroup v1 memory and blkio controllers (else SKIP, exit 0), torch (else SKIP).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BENCH_NAME=peers_bench
# shellcheck source-path=SCRIPTDIR source=bench_lib.sh
. "$HERE/bench_lib.sh"
OUT=peers-bench-out
WORK=${TMPDIR:-/var/tmp}/hdmlp-peers-bench
COUNT=8000
MEM=25
ROUNDS=2
REGIMES="A B"
POOL_READS="1 2 4 8"
FIG_EPOCHS=4
ONLY=""
BATCH=32
WORKERS=2
PY_MARGIN=128
WDS_SRC=""
while [ $# -gt 0 ]; do
    case $1 in
    --count) COUNT=${2:?}; shift 2 ;;
    --memory) MEM=${2:?}; shift 2 ;;
    --rounds) ROUNDS=${2:?}; shift 2 ;;
    --regimes) REGIMES=${2:?}; shift 2 ;;
    --pool-reads) POOL_READS=${2:?}; shift 2 ;;
    --fig-epochs) FIG_EPOCHS=${2:?}; shift 2 ;;
    --contenders) ONLY=${2:?}; shift 2 ;;
    --batch) BATCH=${2:?}; shift 2 ;;
    --py-margin) PY_MARGIN=${2:?}; shift 2 ;;
    --webdataset-src) WDS_SRC=${2:?}; shift 2 ;;
    *) bench_option "$@"; shift "$BENCH_SHIFT" ;;
    esac
done
# --small: at 25 % of 1,500 samples a loader's reserve of two batches of the largest samples
# does not fit beside one abstract chunk at batch 32: batch 8 for every contender
[ "$SMALL" = 1 ] && COUNT=1500 && BATCH=8
bench_need_root "cgroup cells, dropping caches"
bench_tools
bench_need_numpy
bench_dirs
bench_traps :
cell_init "peers_bench$$"
cell_disk "$WORK"
"$PY" -c 'import torch' 2>/dev/null || skip "$PY cannot import torch (the recipe and hdmlp.torch need it)"

# snapshot: the run uses a copy of the build (hdmlp-bench, hdmlp-pack, libhdmlp, the Python
# package) taken when two checksums a second apart agree, so that another build into the
# same tree during the run neither mixes versions nor breaks a probe halfway
build_sum() {
    cat "$BUILD/loader/hdmlp-bench" "$BUILD/packer/hdmlp-pack" "$BUILD"/libhdmlp*.so* \
        "$BUILD"/python/hdmlp/* 2>/dev/null | md5sum | cut -d' ' -f1
}
SNAP=$WORK/snapshot
for try in 1 2 3 4 5 6 7 8 9 10; do
    s1=$(build_sum)
    rm -rf "$SNAP" && mkdir -p "$SNAP/bin" "$SNAP/lib" "$SNAP/python" || die "cannot create $SNAP"
    cp -a "$BUILD/loader/hdmlp-bench" "$BUILD/packer/hdmlp-pack" "$SNAP/bin/" &&
        cp -a "$BUILD"/libhdmlp*.so* "$SNAP/lib/" && cp -a "$BUILD/python/hdmlp" "$SNAP/python/" ||
        die "cannot copy the build"
    sleep 1
    [ "$s1" = "$(build_sum)" ] && LD_LIBRARY_PATH="$SNAP/lib" "$SNAP/bin/hdmlp-bench" --help >/dev/null 2>&1 && break
    log "the build in $BUILD is changing (try $try): snapshot again in 5 s"
    sleep 5
done
[ "$s1" = "$(build_sum)" ] || die "the build in $BUILD kept changing: no consistent snapshot"
BUILD_SUM=$s1
BENCH=$SNAP/bin/hdmlp-bench
PACK=$SNAP/bin/hdmlp-pack
export LD_LIBRARY_PATH="$SNAP/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONPATH="$SNAP/python${PYTHONPATH:+:$PYTHONPATH}"
TORCH_HDMLP=1
"$PY" -c 'import hdmlp.torch' 2>/dev/null || {
    TORCH_HDMLP=0
    log "WARNING: $PY cannot import hdmlp.torch from $SNAP/python: the hdmlp.torch contenders are left out"
}
RECIPE=("$PY" "$HERE/shard_recipe.py")
DRIVER=("$PY" -W ignore::UserWarning "$HERE/peers_run.py")
mkdir -p "$OUT/orders"

# (the help captured first: `prog | grep -q` fails under pipefail when prog gets SIGPIPE)
HELP=$("$BENCH" --help 2>&1)
case $HELP in *--pool-reads*clairvoyant* | *clairvoyant*--pool-reads*) ;;
*) die "$BENCH has no --order/--pool-reads/--policy clairvoyant: build the current tree" ;;
esac

# ---- data -----------------------------------------------------------------------------------
gen_tree tree "$COUNT" 110000 0.6 11
gen_tree warm 200 110000 0.6 99
pack ds "$WORK/tree/files" 64
pack warm_ds "$WORK/warm/files" 64
# shards NAME TREE: WORK/NAME, the recipe's tar shards of WORK/TREE (kept while TREE is)
shards() {
    local stamp
    stamp="$(stat -c %Y "$WORK/$2/sizes.json") seed=7"
    [ -f "$WORK/$1/recipe.json" ] && [ "$(cat "$WORK/$1.stamp" 2>/dev/null)" = "$stamp" ] && return 0
    log "writing the recipe's shards of $2"
    rm -rf "${WORK:?}/$1"
    "${RECIPE[@]}" write "$WORK/$2/files" "$WORK/$1" --seed 7 >"$OUT/logs/shards-$1.json" ||
        die "shard_recipe.py write failed for $2"
    echo "$stamp" >"$WORK/$1.stamp"
}
shards shards tree
shards warm_shards warm
BYTES=$(tree_bytes tree)
N=$COUNT
PERFILE=$OUT/loader_perfile
cc -std=c11 -D_GNU_SOURCE -O2 -pthread "$HERE/loader_perfile.c" -o "$PERFILE" ||
    die "cannot build loader_perfile"

# ---- contenders -----------------------------------------------------------------------------
NAMES="recipe perfile-c hdmlp-strict hdmlp-fill-rate hdmlp-pool"
for r in $POOL_READS; do NAMES+=" hdmlp-pool-r$r"; done
# the strict order with regime A's cost model set by hand (no learning): what the protocols
# read once the model is right, without the first epoch's learning (only when named)
[ -n "$ONLY" ] && NAMES+=" hdmlp-clairvoyant hdmlp-fill-rate-costA hdmlp-clairvoyant-costA"
[ "$TORCH_HDMLP" = 1 ] && NAMES+=" torch-strict torch-pool"
if [ -n "$WDS_SRC" ]; then
    PYTHONPATH="$WDS_SRC" "$PY" -c 'import webdataset' 2>/dev/null ||
        die "--webdataset-src $WDS_SRC: cannot import webdataset from there"
    NAMES="recipe recipe-wds ${NAMES#recipe }"
fi
if [ -n "$ONLY" ]; then
    sel=""
    for n in $NAMES; do case " $ONLY " in *" $n "*) sel+=" $n" ;; esac; done
    NAMES=${sel# }
fi
[ -n "$NAMES" ] || die "no contender left (--contenders '$ONLY')"

COST_A="--op-us 6667 --bandwidth 400MB --no-cost-learning"
# hd_order NAME: hdmlp-bench's order options for NAME
hd_order() {
    case $1 in
    hdmlp-strict) echo "--order strict" ;;
    hdmlp-clairvoyant) echo "--order strict --policy clairvoyant" ;;
    hdmlp-fill-rate) echo "--order strict --policy fill-rate" ;;
    hdmlp-fill-rate-costA) echo "--order strict --policy fill-rate $COST_A" ;;
    hdmlp-clairvoyant-costA) echo "--order strict --policy clairvoyant $COST_A" ;;
    hdmlp-pool) echo "--order pool" ;;
    hdmlp-pool-r*) echo "--order pool --pool-reads ${1#hdmlp-pool-r}" ;;
    esac
}

# command NAME DATA EPOCHS LOG: sets CMD to contender NAME over data set DATA (full|warm),
# EPOCHS epochs, its delivered order logged to LOG (when it has one)
command_for() {
    local name=$1 data=$2 epochs=$3 logf=$4 ds=$WORK/ds sh=$WORK/shards tree=$WORK/tree
    local budget=$MEM%
    # the warm set is too small for a loader at MEM %: 48 MiB (its own memory is what counts)
    if [ "$data" = warm ]; then ds=$WORK/warm_ds sh=$WORK/warm_shards tree=$WORK/warm budget=48M; fi
    case $name in
    recipe)
        CMD=("${RECIPE[@]}" read "$sh" --memory "$budget" --workers "$WORKERS" --batch "$BATCH"
            --seed 1 --epochs "$epochs" --log "$logf") ;;
    recipe-wds)
        CMD=(env "PYTHONPATH=$WDS_SRC:$PYTHONPATH" "${RECIPE[@]}" read "$sh" --memory "$budget"
            --workers "$WORKERS" --batch "$BATCH" --seed 1 --epochs "$epochs" --log "$logf"
            --impl webdataset) ;;
    perfile-c)
        CMD=("$PERFILE" --list "$tree/list.tsv" --root "$tree/files" --threads 2 --seed 1) ;;
    hdmlp-*)
        # shellcheck disable=SC2207
        CMD=("$BENCH" "$ds" --memory "$budget" --batch "$BATCH" --seed 1 --epochs "$epochs"
            --json --quiet --ids "$logf" $(hd_order "$name")) ;;
    torch-*)
        CMD=("${DRIVER[@]}" hdmlp-torch "$ds" --memory "$budget" --workers "$WORKERS"
            --batch "$BATCH" --seed 1 --epochs "$epochs" --order "${name#torch-}" --log "$logf") ;;
    esac
}
is_python() { case $1 in recipe* | torch-*) return 0 ;; esac; return 1; }

PREWARM_NAME=""
# prewarm CMD...: (cell_run) the same contender on the warm set, outside the cell
prewarm() {
    [ -n "$PREWARM_NAME" ] || return 0
    local CMD
    command_for "$PREWARM_NAME" warm 1 "$WORK/prewarm.ids"
    "${CMD[@]}" >/dev/null 2>&1
    return 0
}

# ---- the Python contenders' own memory --------------------------------------------------------
declare -A OWN
for name in $NAMES; do
    OWN[$name]=0
    is_python "$name" || continue
    command_for "$name" warm 1 "$WORK/calibrate.ids"
    PREWARM_NAME=$name
    cell_run "calibrate-$name" $((8 << 30)) 0 0 -- "${CMD[@]}" ||
        die "calibration run of $name failed: $(tail -3 "$OUT/logs/calibrate-$name.err")"
    # the cell's peak less the loader's budget in use (hdmlp) or the shuffle buffers
    # (recipe); hdmlp.torch's arena as it will be on the full data set, not the warm one's
    arena=0
    case $name in torch-*)
        arena=$("${DRIVER[@]}" arena "$WORK/ds" --workers "$WORKERS" --batch "$BATCH") ||
            die "cannot size hdmlp.torch's arena" ;;
    esac
    peak=$("$PY" -c 'import json, sys
c, r = json.loads(sys.argv[1]), json.loads(sys.argv[2] or "{}")
print(c["peak_memory"] - int(r.get("peak_memory_bytes") or r.get("buffer_bytes_est") or 0)
      - int(r.get("plane_arena_bytes") or 0) + int(sys.argv[3]))' \
        "$CELL_JSON" "$(last_json "$OUT/logs/calibrate-$name.out")" "$arena") ||
        die "no calibration result for $name"
    OWN[$name]=$((peak + (PY_MARGIN << 20)))
    log "$name: own processes $((peak >> 20)) MiB on the warm set (allowance $((OWN[$name] >> 20)) MiB)"
done

RES=$OUT/results.jsonl
: >"$RES"
impl=$("$PY" -c 'import webdataset' 2>/dev/null && echo webdataset || echo tarfile)
cat >"$OUT/meta.json" <<EOF
{$(meta_host), "git": "$(git_rev)", "bench": "$BENCH",
 "count": $N, "bytes": $BYTES, "k": 64, "memory_pct": $MEM, "batch": $BATCH,
 "workers": $WORKERS, "rounds": $ROUNDS, "regimes": "$REGIMES", "fig_epochs": $FIG_EPOCHS,

 "recipe_impl": "$impl", "contenders": "$NAMES",
 "sizes": $(cat "$WORK/tree/sizes.json"), "shards": $(cat "$OUT/logs/shards-shards.json" 2>/dev/null || echo null)}
EOF
log "contenders: $NAMES; recipe implementation: $impl"

# ---- randomness: FIG_EPOCHS epochs of each contender's order, outside the cell ----------------
for name in $NAMES; do
    logf=$OUT/orders/$name-fig.ids
    log "order of $name over $FIG_EPOCHS epochs (warm, outside the cell)"
    if [ "$name" = perfile-c ]; then
        "${DRIVER[@]}" perfile-order --list "$WORK/tree/list.tsv" --seed 1 --epochs "$FIG_EPOCHS" \
            --log "$logf" >"$OUT/logs/fig-$name.out" 2>"$OUT/logs/fig-$name.err"
    else
        command_for "$name" full "$FIG_EPOCHS" "$logf"
        "${CMD[@]}" >"$OUT/logs/fig-$name.out" 2>"$OUT/logs/fig-$name.err"
    fi || log "  FAILED: $(tail -2 "$OUT/logs/fig-$name.err")"
    fig=$("$PY" "$HERE/order_figures.py" --k 64 --n "$N" "$logf" 2>>"$OUT/logs/fig-$name.err")
    echo "{\"kind\": \"figures\", \"name\": \"$name\", \"figures\": ${fig:-null}, \"result\": $(last_json "$OUT/logs/fig-$name.out" || echo null)}" >>"$RES"
done
"${RECIPE[@]}" read "$WORK/shards" --memory "$MEM%" --workers "$WORKERS" --batch "$BATCH" --seed 1 \
    --epochs "$FIG_EPOCHS" --order-only --log "$OUT/orders/recipe-generated.ids" >/dev/null ||
    log "recipe --order-only failed"

# ---- cold epochs in the cell --------------------------------------------------------------------
for round in $(seq 1 "$ROUNDS"); do
    order=$NAMES
    # every other round in reverse, so that no contender always runs first
    [ $((round % 2)) = 0 ] && order=$(echo "$NAMES" | tr ' ' '\n' | tac | tr '\n' ' ')
    for regime in $REGIMES; do
        iops=0
        [ "$regime" = A ] && iops=150
        PREWARM_NAME=""
        cell_run "settle-$regime-$round" $((BYTES * MEM / 100 + (64 << 20))) 400000000 "$iops" -- \
            dd if="$WORK/shards/shard-000000.tar" of=/dev/null bs=1M count=64 iflag=direct ||
            die "the settling read failed (see $OUT/logs/settle-$regime-$round.err)"
        for name in $order; do
            tag=$regime-$name-$round
            mem=$((BYTES * MEM / 100 + (64 << 20) + OWN[$name]))
            command_for "$name" full 1 "$OUT/orders/$tag.ids"
            PREWARM_NAME=$name
            log "round $round/$ROUNDS, regime $regime: $name (load $(loadavg))"
            cell_run "$tag" "$mem" 400000000 "$iops" -- "${CMD[@]}" ||
                log "  FAILED (rc $?): $(tail -2 "$OUT/logs/$tag.err")"
            echo "{\"kind\": \"run\", \"name\": \"$name\", \"regime\": \"$regime\", \"round\": $round, \"load\": \"$(loadavg)\", \"cell\": $CELL_JSON, \"result\": $(last_json "$OUT/logs/$tag.out" || echo null)}" >>"$RES"
        done
    done
done
changed=false
if [ "$(build_sum)" != "$BUILD_SUM" ]; then
    changed=true
    log "note: the build in $BUILD changed during the run; this run used the snapshot taken at its start"
fi
echo "{\"build_sum\": \"$BUILD_SUM\", \"build_changed_since\": $changed, \"git_end\": \"$(git_rev)\"}" >"$OUT/build_check.json"
"$PY" "$HERE/peers_report.py" "$OUT" || die "peers_report.py failed"
