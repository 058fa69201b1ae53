#!/bin/bash
# Loader benchmark (issue 3, "Measure"): hdmlp against per-file random reads, inside a
# benchmark cell (cgroup v1 memory limit incl. page cache + blkio read throttle, caches
# dropped before every run), in two storage regimes. See tests/bench/README.md.
#
#   tests/bench/bench_loader.sh [--build DIR] [--out DIR] [--work DIR] [--small]
#                               [--scale F] [--hdmlp-io buffered|direct] [--no-torch]
#                               [--no-sweep] [--keep-data]
#
# Needs root and writable cgroup v1 memory + blkio controllers (else: SKIP, exit 0), the
# built hdmlp-bench and hdmlp-pack (--build, default build/), gcc, /usr/bin/python3 with
# numpy (and torch for the PyTorch contender), gnuplot for the plots.
# Output: OUT/results.json, OUT/table.txt, OUT/*.png, OUT/runs.jsonl, OUT/logs/.
set -u
set -o pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
BENCH_NAME=bench_loader
# shellcheck source-path=SCRIPTDIR source=bench_lib.sh
. "$HERE/bench_lib.sh"
OUT=$PWD/bench-loader-out
WORK=${TMPDIR:-/var/tmp}/hdmlp-loader-bench
SCALE=1
TORCH=1
SWEEP=1
HDMLP_IO=direct

while [ $# -gt 0 ]; do
    case $1 in
    --scale) SCALE=${2:?}; shift 2 ;;
    --hdmlp-io) HDMLP_IO=${2:?}; shift 2 ;;
    --no-torch) TORCH=0; shift ;;
    --no-sweep) SWEEP=0; shift ;;
    *) bench_option "$@"; shift "$BENCH_SHIFT" ;;
    esac
done
case $HDMLP_IO in buffered | direct) ;; *) echo "bench_loader: --hdmlp-io buffered|direct" >&2; exit 2 ;; esac

bench_tools
bench_need_numpy
if [ "$TORCH" = 1 ] && ! "$PY" -c 'import torch' 2>/dev/null; then
    log "torch not importable with $PY: the PyTorch contender is left out"
    TORCH=0
fi

# ---- the cell: cgroup v1 memory + blkio, nested under this process's own groups -------
bench_need_root "cgroups, drop_caches"
cell_init hdmlp-cell-$$
bench_dirs
cell_disk "$WORK"
log "work dir $WORK on $DISK ($DEV); output $OUT"
bench_traps :

# prewarm PROGRAM: runs PROGRAM once on a tiny warm-up dataset outside the cell, so that
# its binary, libraries and (for Python) every module it imports are in the page cache:
# the cell measures data I/O, not start-up from a throttled disk.
prewarm() {
    case $1 in
    "$PY") "$PY" "$HERE/loader_torch_baseline.py" --list "$WORK/warm/list.tsv" \
        --root "$WORK/warm/files" --workers 2 --batch 4 ;;
    "$BENCH") "$BENCH" "$WORK/warm_k4" --memory 64M --batch 4 --json --quiet ;;
    "$PERFILE") "$PERFILE" --list "$WORK/warm/list.tsv" --root "$WORK/warm/files" ;;
    *) "$1" "$WORK/warm_k4/index" ;;
    esac >/dev/null 2>&1
}

# record KIND REGIME DATASET CONTENDER EXTRA_JSON: appends one line to runs.jsonl with the
# program's JSON (last line of logs/TAG.out starting with '{', or null) and the cell's.
RUNS=$OUT/runs.jsonl
record() {
    local tag=$1 kind=$2 regime=$3 dataset=$4 contender=$5 extra=$6 res
    res=$(last_json "$OUT/logs/$tag.out")
    echo "{\"tag\": \"$tag\", \"kind\": \"$kind\", \"regime\": \"$regime\", \"dataset\": \"$dataset\"," \
        "\"contender\": \"$contender\", $extra \"cell\": $CELL_JSON, \"result\": ${res:-null}}" >>"$RUNS"
}

# ---- sizes ------------------------------------------------------------------------------
scaled() { awk -v n="$1" -v s="$SCALE" 'BEGIN { v = int(n * s); print (v < 64 ? 64 : v) }'; }
if [ "$SMALL" = 1 ]; then
    IMG_B=3000 IMG_A=1000 S16_B=8000 S16_A=1000 TINY=40000 BATCH=8 BATCH_A=2
else
    IMG_B=36000 IMG_A=5000 S16_B=65536 S16_A=4000 TINY=262144 BATCH=32 BATCH_A=4
fi
IMG_B=$(scaled $IMG_B) IMG_A=$(scaled $IMG_A) S16_B=$(scaled $S16_B) S16_A=$(scaled $S16_A)
TINY=$(scaled $TINY)
[ "$IMG_A" -le "$IMG_B" ] || IMG_A=$IMG_B
[ "$S16_A" -le "$S16_B" ] || S16_A=$S16_B

MiB=1048576
MB400=400000000
IOPS_A=150
OP_US_A=6667  # 1e6 / 150: one operation's cost in regime A
OP_US_B=100   # the library's default (this disk: ~70 us per 128 KiB op at QD1)
THREADS=2
SEED=1
MEM_PCT=25
C_ALLOWANCE=$((64 * MiB))     # cell limit = 25 % of the dataset + this, for C programs
PY_ALLOWANCE=$((1024 * MiB))  # and this for the PyTorch contender (interpreter + 2 workers)
K_SWEEP="1 4 16 64 256"
MEM_SWEEP="15 25 50 100"

# The loader reserves 2 x batch x (largest sample) of its budget; the scaled-down datasets of
# regime A and of the sweeps (img_a, s16_a) get a batch scaled down with them (BATCH_A), so
# that this reserve is about the same share of the budget as at full size with BATCH.
batch_for() { case $1 in img_a* | s16_a*) echo "$BATCH_A" ;; *) echo "$BATCH" ;; esac; }

# ---- build the helpers, make and pack the datasets --------------------------------------
PERFILE=$OUT/loader_perfile
cc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -pthread "$HERE/loader_perfile.c" -o "$PERFILE" ||
    die "cannot build loader_perfile"

T_START=$(date +%s)
gen_tree img "$IMG_B" 112640 0.6 11
gen_tree warm 64 4096 0 10
gen_subset img_a img "$IMG_A"
gen_tree s16 "$S16_B" 16384 0.25 12
gen_subset s16_a s16 "$S16_A"
if [ ! -f "$WORK/tiny.tar" ] || [ "$(cat "$WORK/tiny.count" 2>/dev/null)" != "$TINY" ]; then
    log "generating tiny.tar: $TINY members of 1 KiB"
    "$PY" "$HERE/loader_gen.py" tar "$WORK/tiny.tar" --count "$TINY" --size 1024 --seed 13 ||
        die "cannot generate tiny.tar"
    echo "$TINY" >"$WORK/tiny.count"
fi
pack warm_k4 "$WORK/warm/files" 4
pack img_k64 "$WORK/img/files" 64
pack img_a_k64 "$WORK/img_a/files" 64
pack s16_k64 "$WORK/s16/files" 64
pack s16_a_k64 "$WORK/s16_a/files" 64
pack tiny_k64 "$WORK/tiny.tar" 64
if [ "$SWEEP" = 1 ]; then
    for k in $K_SWEEP; do
        [ "$k" = 64 ] || pack "img_a_k$k" "$WORK/img_a/files" "$k"
    done
fi
T_DATA=$(date +%s)
log "datasets ready in $((T_DATA - T_START)) s"

# ---- contenders ---------------------------------------------------------------------------
regime_bps() { echo $MB400; }
regime_iops() { [ "$1" = A ] && echo $IOPS_A || echo 0; }
regime_cost() { [ "$1" = A ] && echo "--op-us $OP_US_A --bandwidth $MB400" || echo "--op-us $OP_US_B --bandwidth $MB400"; }
OTHER_IO=direct
[ "$HDMLP_IO" = direct ] && OTHER_IO=buffered

# hdmlp_run KIND REGIME DATASET(tree name) PACKED CONTENDER MEM_PCT ARGS...
# (I/O mode: $HDMLP_IO, or the one a contender name ends with: -direct / -buffered)
hdmlp_run() {
    local kind=$1 regime=$2 ds=$3 packed=$4 contender=$5 pct=$6 raw tag io=$HDMLP_IO
    shift 6
    case $contender in *-direct) io=direct ;; *-buffered) io=buffered ;; esac
    local io_flag=""
    [ "$io" = direct ] && io_flag=--direct
    tag=$kind-$regime-$packed-$contender-m$pct
    raw=$(tree_bytes "$ds")
    local budget=$((raw * pct / 100))
    log "$tag"
    # shellcheck disable=SC2046
    cell_run "$tag" $((budget + C_ALLOWANCE)) "$(regime_bps "$regime")" "$(regime_iops "$regime")" -- \
        "$BENCH" "$WORK/$packed" --memory "$pct%" --batch "$(batch_for "$ds")" --threads $THREADS --seed $SEED \
        $(regime_cost "$regime") $io_flag --json --quiet "$@" ||
        log "  FAILED (rc $?): $(tail -2 "$OUT/logs/$tag.err")"
    record "$tag" "$kind" "$regime" "$packed" "$contender" "\"memory_pct\": $pct, \"raw_bytes\": $raw, \"io\": \"$io\", \"batch\": $(batch_for "$ds"),"
}

# contenders REGIME TREE PACKED
contenders() {
    local regime=$1 ds=$2 packed=$3 raw budget tag
    raw=$(tree_bytes "$ds")
    budget=$((raw * MEM_PCT / 100))
    tag=main-$regime-$ds-perfile
    log "$tag"
    cell_run "$tag" $((budget + C_ALLOWANCE)) $MB400 "$(regime_iops "$regime")" -- \
        "$PERFILE" --list "$WORK/$ds/list.tsv" --root "$WORK/$ds/files" --threads $THREADS --seed $SEED ||
        log "  FAILED: $(tail -2 "$OUT/logs/$tag.err")"
    record "$tag" main "$regime" "$packed" perfile-c "\"memory_pct\": $MEM_PCT, \"raw_bytes\": $raw,"
    if [ "$TORCH" = 1 ]; then
        tag=main-$regime-$ds-torch
        log "$tag"
        cell_run "$tag" $((budget + PY_ALLOWANCE)) $MB400 "$(regime_iops "$regime")" -- \
            "$PY" "$HERE/loader_torch_baseline.py" --list "$WORK/$ds/list.tsv" --root "$WORK/$ds/files" \
            --workers 2 --batch "$(batch_for "$ds")" --seed $SEED || log "  FAILED: $(tail -2 "$OUT/logs/$tag.err")"
        record "$tag" main "$regime" "$packed" torch-dataloader "\"memory_pct\": $MEM_PCT, \"raw_bytes\": $raw,"
    fi
    for r in whole ranges auto; do
        hdmlp_run main "$regime" "$ds" "$packed" "hdmlp-$r" $MEM_PCT --refill $r
    done
    hdmlp_run main "$regime" "$ds" "$packed" hdmlp-random $MEM_PCT --refill auto --policy random
    hdmlp_run main "$regime" "$ds" "$packed" "hdmlp-auto-$OTHER_IO" $MEM_PCT --refill auto
    tag=main-$regime-$ds-seq
    log "$tag"
    local segs
    mapfile -t segs < <(find "$WORK/$packed" -maxdepth 1 -type f ! -name index | sort)
    cell_run "$tag" $((budget + C_ALLOWANCE)) $MB400 "$(regime_iops "$regime")" -- \
        "$HERE/loader_seqread.sh" "${segs[@]}" || log "  FAILED: $(tail -2 "$OUT/logs/$tag.err")"
    record "$tag" main "$regime" "$packed" seq-read "\"memory_pct\": $MEM_PCT, \"raw_bytes\": $raw,"
}

: >"$RUNS"
for regime in A B; do
    if [ $regime = A ]; then img=img_a s16=s16_a; else img=img s16=s16; fi
    contenders $regime $img "${img}_k64"
    contenders $regime $s16 "${s16}_k64"
done
T_MAIN=$(date +%s)
log "main runs done in $((T_MAIN - T_DATA)) s"

if [ "$SWEEP" = 1 ]; then
    for regime in A B; do
        for k in $K_SWEEP; do
            for r in whole auto; do
                # Regime A's main runs already cover img_a_k64; at K = 1 every refill is one
                # sample, so auto reads exactly what whole reads.
                if { [ $regime = A ] && [ "$k" = 64 ]; } || { [ "$k" = 1 ] && [ $r = auto ]; }; then
                    continue
                fi
                hdmlp_run sweep-k $regime img_a "img_a_k$k" "hdmlp-$r" $MEM_PCT --refill $r
            done
        done
        for pct in $MEM_SWEEP; do
            [ $regime = A ] && [ "$pct" = $MEM_PCT ] && continue
            hdmlp_run sweep-mem $regime img_a img_a_k64 hdmlp-auto "$pct" --refill auto
        done
    done
fi
T_SWEEP=$(date +%s)
log "sweeps done in $((T_SWEEP - T_MAIN)) s"

# ---- warm path: budget >= dataset, data in the page cache, no cell -----------------------
for ds in img_a_k64 tiny_k64; do
    tag=warm-$ds
    batch=$BATCH
    [ $ds = tiny_k64 ] && batch=256
    log "$tag"
    cat "$WORK/$ds"/* >/dev/null
    "$BENCH" "$WORK/$ds" --memory 200% --batch $batch --threads $THREADS --epochs 5 --seed $SEED \
        --json --quiet >"$OUT/logs/$tag.out" 2>"$OUT/logs/$tag.err" || log "  FAILED: $(tail -2 "$OUT/logs/$tag.err")"
    CELL_JSON=null
    record "$tag" warm - "$ds" hdmlp-auto "\"memory_pct\": 200, \"batch\": $batch,"
done

# ---- simulation agreement: several epochs, warm cache, no cell (statistics only) --------
AGREE_EPOCHS=5
for ds in img_a_k64 s16_a_k64 s16_k64 $([ "$SWEEP" = 1 ] && for k in $K_SWEEP; do [ "$k" = 64 ] || echo "img_a_k$k"; done); do
    for policy in fill-rate random; do
        tag=agree-$ds-$policy
        log "$tag"
        cat "$WORK/$ds"/* >/dev/null
        "$BENCH" "$WORK/$ds" --memory $MEM_PCT% --batch "$(batch_for "$ds")" --threads $THREADS --epochs $AGREE_EPOCHS \
            --seed $SEED --policy $policy --refill whole --json --quiet >"$OUT/logs/$tag.out" \
            2>"$OUT/logs/$tag.err" || log "  FAILED: $(tail -2 "$OUT/logs/$tag.err")"
        CELL_JSON=null
        record "$tag" agree - "$ds" "hdmlp-$policy" "\"memory_pct\": $MEM_PCT,"
    done
done

# ---- report ---------------------------------------------------------------------------
cat >"$OUT/meta.json" <<EOF
{$(meta_host),
 "mem_total_kib": $(awk '/MemTotal/ { print $2 }' /proc/meminfo), "device": "$DISK", "dev": "$DEV",
 "git": "$(git_rev)",
 "small": $SMALL, "scale": $SCALE, "hdmlp_io": "$HDMLP_IO", "threads": $THREADS, "batch": $BATCH,
 "batch_a": $BATCH_A, "seed": $SEED, "pack_seed": $PACK_SEED, "memory_pct": $MEM_PCT, "read_bps": $MB400,
 "iops_a": $IOPS_A, "op_us_a": $OP_US_A, "op_us_b": $OP_US_B,
 "c_allowance": $C_ALLOWANCE, "py_allowance": $PY_ALLOWANCE,
 "counts": {"img": $IMG_B, "img_a": $IMG_A, "s16": $S16_B, "s16_a": $S16_A, "tiny": $TINY},
 "sizes": {"img": $(cat "$WORK/img/sizes.json"), "img_a": $(cat "$WORK/img_a/sizes.json"),
           "s16": $(cat "$WORK/s16/sizes.json"), "s16_a": $(cat "$WORK/s16_a/sizes.json")},
 "seconds": {"datasets": $((T_DATA - T_START)), "main": $((T_MAIN - T_DATA)),
             "sweeps": $((T_SWEEP - T_MAIN)), "total": $(($(date +%s) - T_START))}}
EOF
"$PY" "$HERE/loader_report.py" "$OUT" || die "report failed"
