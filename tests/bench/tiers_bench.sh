#!/bin/bash
# Tiers benchmark (issue 6, "Measure"): source bytes per epoch and epoch time over several
# epochs with a slow source (the dataset, throttled) and a fast local tier (an unthrottled
# directory standing in for the SSD), tiers off (= SSD 0 %) vs SSD capacities of 25/50/100 % of the
# dataset; plus the forecast (--plan --json) next to each run. See tests/bench/README.md.
#
#   tests/bench/tiers_bench.sh [--build DIR] [--out DIR] [--work DIR] [--small]
#                              [--epochs E] [--regimes "A B"] [--only "CONFIG..."]
#                              [--allowance MIB] [--compute-ms-a MS] [--compute-ms-b MS]
#                              [--keep-data]
#
# CONFIGs: local off ssd25 ssd50 ssd100 ssd100-reuse off+compute ssd100+compute
# reuse-staged ram25-of-m50 (default: all; ssd100-reuse reuses ssd100's cache, reuse-staged
# ssd100+compute's).
#
# Needs root, writable cgroup v1 memory + blkio controllers, losetup + mkfs.ext4 (else:
# SKIP, exit 0), hdmlp-bench with --ssd-cache/--plan, hdmlp-pack, /usr/bin/python3.
# Output: OUT/runs.jsonl, OUT/results.json, OUT/table.txt, OUT/*.png, OUT/logs/.
#
# The slow source is a loop device: an ext4 image file (WORK/source.img) attached with
# losetup --direct-io=on and mounted at WORK/src. The blkio throttle applies per device,
# so only the loop device's MAJ:MIN is throttled; the SSD cache directory (WORK/ssd) sits
# on the root disk, outside the throttle.
set -u
set -o pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
BENCH_NAME=tiers_bench
# shellcheck source-path=SCRIPTDIR source=bench_lib.sh
. "$HERE/bench_lib.sh"
OUT=$PWD/bench-tiers-out
WORK=${TMPDIR:-/var/tmp}/hdmlp-tiers-bench
EPOCHS=5
REGIMES="A B"
ONLY=""
ALLOW_MIB=64
CMS_A=""
CMS_B=""

while [ $# -gt 0 ]; do
    case $1 in
    --epochs) EPOCHS=${2:?}; shift 2 ;;
    --regimes) REGIMES=${2:?}; shift 2 ;;
    --only) ONLY=${2:?}; shift 2 ;;
    --allowance) ALLOW_MIB=${2:?}; shift 2 ;;
    --compute-ms-a) CMS_A=${2:?}; shift 2 ;;
    --compute-ms-b) CMS_B=${2:?}; shift 2 ;;
    *) bench_option "$@"; shift "$BENCH_SHIFT" ;;
    esac
done

bench_tools
bench_need_option --ssd-cache
bench_need_option --plan

bench_need_root "cgroups, loop devices, drop_caches"
command -v losetup >/dev/null && command -v mkfs.ext4 >/dev/null || skip "needs losetup and mkfs.ext4"
cell_init hdmlp-tiers-$$
bench_dirs
disk_of "$WORK"
ROOTDISK=$DISK
ROOTDEV=$DISK_DEV
LOOP=""
MNT=$WORK/src
SSD=$WORK/ssd

# the loop device and the copies (bench_cleanup then removes WORK unless --keep-data)
cleanup_source() {
    if mountpoint -q "$MNT" 2>/dev/null; then
        umount "$MNT" 2>/dev/null || { sleep 1; umount "$MNT"; }
    fi
    [ -n "$LOOP" ] && losetup -d "$LOOP" 2>/dev/null
    rm -f "$WORK/source.img"
    rm -rf "$SSD" "$WORK/local"
}
bench_traps cleanup_source

# ---- datasets (trees on the root disk) ---------------------------------------------------
if [ "$SMALL" = 1 ]; then
    N_B=3000 N_A=2000 BATCH_B=8 BATCH_A=2 COMPUTE_MS_A=10 COMPUTE_MS_B=4
else
    # B: ~2 GB (epochs of ~5 s at 400 MB/s); A: ~540 MB (at 150 ops/s an epoch of the
    # strict protocol takes several seconds; per-file reads would take ~35 s).
    N_B=18000 N_A=5000 BATCH_B=32 BATCH_A=4 COMPUTE_MS_A=20 COMPUTE_MS_B=12
fi
COMPUTE_MS_A=${CMS_A:-$COMPUTE_MS_A}
COMPUTE_MS_B=${CMS_B:-$COMPUTE_MS_B}
gen_tree tree_b "$N_B" 112640 0.6 11
gen_subset tree_a tree_b "$N_A"
RAW_A=$(tree_bytes tree_a)
RAW_B=$(tree_bytes tree_b)

# ---- the slow source: a loop device holding the packed datasets --------------------------
umount "$MNT" 2>/dev/null
for l in $(losetup -j "$WORK/source.img" -O NAME -n 2>/dev/null); do losetup -d "$l"; done
rm -f "$WORK/source.img"
IMG_BYTES=$((((RAW_A + RAW_B) * 11 / 10 + (256 << 20)) >> 20 << 20))
truncate -s "$IMG_BYTES" "$WORK/source.img" || die "cannot create $WORK/source.img"
mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$WORK/source.img" || die "mkfs.ext4 failed"
LOOP=$(losetup --direct-io=on --find --show "$WORK/source.img") || skip "cannot attach a loop device"
mkdir -p "$MNT"
mount -o noatime "$LOOP" "$MNT" || die "cannot mount $LOOP"
LOOPDEV=$(lsblk -dno MAJ:MIN "$LOOP" | tr -d ' ')
log "source: $LOOP ($LOOPDEV, direct-io $(losetup -nO DIO "$LOOP" | tr -d ' '), max request" \
    "$(cat "/sys/block/$(basename "$LOOP")/queue/max_sectors_kb") KiB) mounted at $MNT;" \
    "SSD dir $SSD on $ROOTDISK ($ROOTDEV)"
for x in a b; do
    log "packing ds_$x into the source (K=64)"
    pack_into "$MNT/ds_$x" "$WORK/tree_$x/files" 64 "$x"
done
mkdir -p "$WORK/local"
cp -a "$MNT/ds_a" "$MNT/ds_b" "$WORK/local/" || die "cannot copy the datasets to $WORK/local"
sync
seg_bytes() { find "$1" -maxdepth 1 -type f ! -name index -printf '%s\n' | awk '{ s += $1 } END { printf "%.0f\n", s }'; }
SEG_A=$(seg_bytes "$MNT/ds_a")
SEG_B=$(seg_bytes "$MNT/ds_b")

# ---- the cell -------------------------------------------------------------------------------
MiB=1048576
MB400=400000000
IOPS_A=150
ALLOWANCE=$((ALLOW_MIB * MiB))

CELL_THROTTLE=$LOOPDEV                                  # only the source is throttled
CELL_COUNTERS="source_dev=$LOOPDEV root_dev=$ROOTDEV" # reads of both disks are counted

# prewarm CMD...: hdmlp-bench's binary and libraries into the page cache, outside the cell.
prewarm() {
    "$BENCH" "$WORK/local/ds_a" --memory 64M --batch 4 --ram-cache 0 --json --quiet >/dev/null 2>&1
}

RUNS=$OUT/runs.jsonl
: >"$RUNS"
LOAD_LOG=$OUT/loadavg.log
: >"$LOAD_LOG"

# run REGIME NAME DATASET_DIR MEM_PCT -- EXTRA_ARGS...: the run in the cell, then the same
# configuration's forecast (--plan --json, outside the cell: metadata only).
run() {
    local regime=$1 name=$2 ds=$3 pct=$4 raw batch bps iops cost tag l0 l1
    shift 5
    if [ -n "$ONLY" ] && ! [[ " $ONLY " == *" $name "* ]]; then
        return 0
    fi
    if [ "$regime" = A ]; then
        raw=$RAW_A batch=$BATCH_A iops=$IOPS_A cost="--op-us 6667 --bandwidth $MB400"
    else
        raw=$RAW_B batch=$BATCH_B iops=0 cost="--op-us 100 --bandwidth $MB400"
    fi
    bps=$MB400
    case $name in local*) bps=0 iops=0 ;; esac
    tag=$regime-$name
    # shellcheck disable=SC2206
    local args=("$ds" --memory "$pct%" --batch "$batch" --threads 2 --seed 1 --epochs "$EPOCHS"
        $cost --direct "$@")
    l0=$(loadavg)
    log "$tag (load $l0): ${args[*]}"
    cell_run "$tag" $((raw * pct / 100 + ALLOWANCE)) "$bps" "$iops" -- "$BENCH" "${args[@]}" --json --quiet ||
        log "  FAILED (rc $?): $(tail -2 "$OUT/logs/$tag.err")"
    l1=$(loadavg)
    echo "$tag $l0 -> $l1" >>"$LOAD_LOG"
    "$BENCH" "${args[@]}" --plan --json --quiet >"$OUT/logs/$tag.plan" 2>"$OUT/logs/$tag.plan.err" ||
        log "  plan FAILED: $(tail -2 "$OUT/logs/$tag.plan.err")"
    local res pl
    res=$(last_json "$OUT/logs/$tag.out")
    pl=$(last_json "$OUT/logs/$tag.plan")
    echo "{\"tag\": \"$tag\", \"regime\": \"$regime\", \"config\": \"$name\", \"memory_pct\": $pct," \
        "\"raw_bytes\": $raw, \"segment_bytes\": $([ "$regime" = A ] && echo "$SEG_A" || echo "$SEG_B")," \
        "\"batch\": $batch, \"load_before\": \"$l0\", \"load_after\": \"$l1\", \"args\": \"${args[*]}\"," \
        "\"cell\": $CELL_JSON, \"result\": ${res:-null}, \"plan\": ${pl:-null}}" >>"$RUNS"
}

T0=$(date +%s)
for regime in $REGIMES; do
    if [ "$regime" = A ]; then x=a seg=$SEG_A raw=$RAW_A; else x=b seg=$SEG_B raw=$RAW_B; fi
    ds=$MNT/ds_$x
    # The local tier's limit: the same loader reading an unthrottled copy on the root disk.
    run "$regime" local "$WORK/local/ds_$x" 25 -- --ram-cache 0
    # SSD 0 %: capacity 0 turns the tier off (as in the API), so this is the 'off' run.
    run "$regime" off "$ds" 25 -- --ram-cache 0 --ssd-cache "$SSD" --ssd-capacity 0
    for pct in 25 50 100; do
        rm -rf "$SSD"
        mkdir -p "$SSD"
        # 100 % = the dataset's segment bytes (chunks with their 4 KiB alignment).
        cap=$((seg * pct / 100))
        run "$regime" "ssd$pct" "$ds" 25 -- --ram-cache 0 --ssd-cache "$SSD" --ssd-capacity "$cap"
    done
    # A second run over the cache the ssd100 run left: a later job reuses it from epoch 0.
    run "$regime" ssd100-reuse "$ds" 25 -- --ram-cache 0 --ssd-cache "$SSD" --ssd-capacity "$((seg))"
    # With simulated compute per batch (the loader waits for the model, so I/O has idle
    # time): epochs ~1.3-1.6x the I/O-bound epoch of 'off' (the loop device caps requests at
    # 1280 KiB, so A's I/O-bound epoch is ~15 s); the SSD stager reads while I/O is idle.
    cms=$([ "$regime" = A ] && echo "$COMPUTE_MS_A" || echo "$COMPUTE_MS_B")
    run "$regime" off+compute "$ds" 25 -- --ram-cache 0 --compute-ms "$cms"
    rm -rf "$SSD"
    mkdir -p "$SSD"
    run "$regime" ssd100+compute "$ds" 25 -- --ram-cache 0 --compute-ms "$cms" --ssd-cache "$SSD" --ssd-capacity "$seg"
    # A later job without compute reusing what ssd100+compute staged: the SSD tier's own
    # limit when the cache is complete.
    run "$regime" reuse-staged "$ds" 25 -- --ram-cache 0 --ssd-cache "$SSD" --ssd-capacity "$seg"
    rm -rf "$SSD"
    # RAM tier: budget 50 % of the dataset, a quarter of the dataset of it as chunk cache.
    run "$regime" ram25-of-m50 "$ds" 50 -- --ram-cache "$((raw / 4))"
done
T1=$(date +%s)

cat >"$OUT/meta.json" <<EOF
{$(meta_host),
 "git": "$(git_rev)",
 "bench": "$BENCH", "bench_version": "$("$BENCH" -V 2>/dev/null | head -1)",
 "small": $SMALL, "epochs": $EPOCHS, "regimes": "$REGIMES", "read_bps": $MB400, "iops_a": $IOPS_A,
 "allowance": $ALLOWANCE, "loop": "$LOOP", "loop_dev": "$LOOPDEV",
 "loop_max_sectors_kb": $(cat "/sys/block/$(basename "$LOOP")/queue/max_sectors_kb"),
 "root_disk": "$ROOTDISK", "root_dev": "$ROOTDEV",
 "root_max_sectors_kb": $(cat "/sys/block/$(basename "$ROOTDISK")/queue/max_sectors_kb" 2>/dev/null || echo 0),
 "datasets": {"A": {"files": $N_A, "raw_bytes": $RAW_A, "segment_bytes": $SEG_A, "batch": $BATCH_A},
              "B": {"files": $N_B, "raw_bytes": $RAW_B, "segment_bytes": $SEG_B, "batch": $BATCH_B}},
 "compute_ms": {"A": $COMPUTE_MS_A, "B": $COMPUTE_MS_B},
 "seconds": $((T1 - T0))}
EOF
"$PY" "$HERE/tiers_report.py" "$OUT" || die "report failed"
