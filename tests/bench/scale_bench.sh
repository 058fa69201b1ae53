#!/bin/bash
# Scale: what hdmlp costs as the sample count grows (issue 27, "Web-scale sample counts:
# metadata that grows with chunks, not samples"). For each N in COUNTS: N tiny samples
# (64 B, 100 class directories; scale_gen.py) generated as a tar stream, compressed with
# `zstd -1` into one .tar.zst (hdmlp-pack reads archives from regular files only, not from
# a pipe) and packed with hdmlp-pack (K auto: the packer's default, or --chunk-size K;
# uncompressed, 2 threads); the .tar.zst is
# deleted as soon as it is packed. Then, per N:
#   - pack: seconds, user + sys CPU, the packer's peak RSS (/usr/bin/time);
#   - the index file's bytes, and per sample; the segments' bytes;
#   - the loader (bench_scale, public API, one epoch, budget MEMORY, batch 32, 2 threads,
#     warm page cache): open time, time to first batch, samples/s, RSS split into
#     anonymous (private) and file-mapped (/proc/self/status RssAnon / RssFile, sampled
#     every 64 batches; the largest values), both less the process's own at its start,
#     anonymous also less the budget, per sample; once more at half the budget (what of
#     the anonymous memory follows the budget rather than N);
#   - hdmlp-bench, one epoch with its defaults (it adds 8 B a sample for its randomness
#     figures): samples/s and peak RSS, the figure users see;
#   - `hdmlp-bench --plan` (the forecast, no data read) for PLAN_EPOCHS epochs: first a
#     probe of 2 epochs; when PLAN_EPOCHS would take more than PLAN_MAX seconds at its
#     rate, the forecast runs as many epochs as fit in PLAN_MAX / 2 (at least 2) and its
#     time is scaled to PLAN_EPOCHS (the table marks it "extrapolated").
# Then scale_report.py prints the table, the per-sample slopes (least squares over the
# counts) and the extrapolation to 100 M and 1 B samples, and writes the JSON.
#
#   tests/bench/scale_bench.sh [--build DIR] [--out DIR] [--work DIR] [--keep-data]
#                              [--small] [--counts "1000000 4000000"] [--memory BYTES]
#                              [--chunk-size K|auto]
#                              [--plan-epochs 90] [--plan-max SECONDS] [--json FILE]
#
# Defaults: COUNTS "1000000 4000000", MEMORY 33554432 (32 MiB), PLAN_EPOCHS 90, PLAN_MAX
# 600. --small: COUNTS "100000 200000", PLAN_EPOCHS 9 (a smoke run, seconds).
# --loader-samples M (for counts too large for an epoch here, such as 100 M): the loader
# runs stop after M samples (rates over what was taken), and the half-budget run,
# hdmlp-bench and the forecast are left out (null in the JSON, "–" in the table).
# Counts of 10 M and more are allowed after a check: each N needs about 350 B a sample of
# disk in WORK (format 2: .tar.zst ~65, the packer's spill files ~150, segments ~65,
# tables 32, keys ~25; + 1 GiB) and about 20 B a sample of memory (the packer's 5 B
# measured at 1-10 M, with room); a count is refused with a message when WORK's file
# system would have less than max(10 GiB, 10 % of its size) left, or MemAvailable is below
# that memory plus a quarter of MemTotal (kept for the machine's other users). No root needed;
# caches are not dropped (the loader runs warm, right after the pack). Needs /usr/bin/time,
# zstd, python3 and the built hdmlp-pack, hdmlp-bench and bench_scale (--build, default
# build/). Output: OUT/runs.jsonl (one line per N), OUT/table.txt, OUT/logs/, and the JSON
# result (default tests/bench/results/scale_DATE.json, with --small OUT/scale.json; --json
# FILE). `scale_report.py OUT/runs.jsonl` re-renders the table.
set -u
set -o pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
BENCH_NAME=scale_bench
# shellcheck source-path=SCRIPTDIR source=bench_lib.sh
. "$HERE/bench_lib.sh"
OUT=$PWD/scale-bench-out
WORK=${TMPDIR:-/var/tmp}/hdmlp-scale-bench
COUNTS="1000000 4000000"
MEMORY=33554432
PLAN_EPOCHS=90
PLAN_MAX=600
JSON_OUT=
SAMPLE_SIZE=64
CLASSES=100
K=auto
LOADER_SAMPLES=0

while [ $# -gt 0 ]; do
    case $1 in
    --counts) COUNTS=${2:?}; shift 2 ;;
    --chunk-size) K=${2:?}; shift 2 ;;
    --memory) MEMORY=${2:?}; shift 2 ;;
    --plan-epochs) PLAN_EPOCHS=${2:?}; shift 2 ;;
    --plan-max) PLAN_MAX=${2:?}; shift 2 ;;
    --loader-samples) LOADER_SAMPLES=${2:?}; shift 2 ;;
    --json) JSON_OUT=${2:?}; shift 2 ;;
    *) bench_option "$@"; shift "$BENCH_SHIFT" ;;
    esac
done
if [ "$SMALL" = 1 ]; then
    COUNTS="100000 200000"
    PLAN_EPOCHS=9
fi
if [ -z "$JSON_OUT" ]; then
    # a smoke run does not replace the day's results
    JSON_OUT=$SRC/tests/bench/results/scale_$(date +%F).json
    [ "$SMALL" = 0 ] || JSON_OUT=$OUT/scale.json
fi

[ -x /usr/bin/time ] || skip "needs /usr/bin/time (Debian package time)"
command -v zstd >/dev/null || skip "needs zstd"
bench_tools
SCALE=${HDMLP_BENCH_SCALE:-$BUILD/tests/bench_scale}
[ -x "$SCALE" ] || die "no bench_scale at $SCALE (cmake --build BUILD --target bench_scale)"
for n in $COUNTS; do
    case $n in '' | *[!0-9]*) die "--counts: '$n' is not a sample count" ;; esac
    [ "$n" -ge 1000 ] || die "--counts: $n is below 1000"
done
bench_dirs
bench_traps :
: >"$OUT/runs.jsonl"

# check_room N: dies (naming what is short) unless WORK's disk and the machine's memory
# hold a run of N samples with room left for others (the numbers in the header).
check_room() {
    local n=$1 avail size keep need mem_avail mem_total mem_need
    avail=$(df -B1 --output=avail "$WORK" | tail -1 | tr -d ' ')
    size=$(df -B1 --output=size "$WORK" | tail -1 | tr -d ' ')
    keep=$((size * 10 / 100))
    [ "$keep" -gt $((10 << 30)) ] || keep=$((10 << 30))
    need=$((n * 350 + (1 << 30)))
    if [ $((avail - need)) -lt "$keep" ]; then
        die "refusing N = $n: it needs ~$((need >> 30)) GiB in $WORK, which has $((avail >> 30)) GiB free, and $((keep >> 30)) GiB must stay free (max(10 GiB, 10 % of the file system)); pass a smaller --counts or a --work with more room"
    fi
    mem_avail=$(awk '$1 == "MemAvailable:" { printf "%.0f", $2 * 1024 }' /proc/meminfo)
    mem_total=$(awk '$1 == "MemTotal:" { printf "%.0f", $2 * 1024 }' /proc/meminfo)
    mem_need=$((n * 20))
    if [ $((mem_avail - mem_need)) -lt $((mem_total / 4)) ]; then
        die "refusing N = $n: the packer and loader need ~$((mem_need >> 20)) MiB, MemAvailable is $((mem_avail >> 20)) MiB and a quarter of MemTotal ($((mem_total >> 22)) MiB) stays for others"
    fi
}
for n in $COUNTS; do check_room "$n"; done

# timed LOG CMD...: runs CMD with /usr/bin/time; stdout to LOG.out, stderr to LOG.err;
# sets T_WALL T_USER T_SYS T_RSS_KIB. Returns CMD's status.
timed() {
    local log=$1 rc
    shift
    /usr/bin/time -f '%e %U %S %M' -o "$log.time" "$@" >"$log.out" 2>"$log.err"
    rc=$?
    read -r T_WALL T_USER T_SYS T_RSS_KIB <"$log.time"
    return $rc
}

# json_get FILE KEY: the number KEY of the JSON object on the last '{' line of FILE.
json_get() {
    last_json "$1" | "$PY" -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$2"
}

# plan_run N DS E: `hdmlp-bench --plan` of DS for E epochs; sets PLAN_S (the forecast's own
# seconds) and T_* (timed). --quiet also keeps --plan from forecasting its budget-split
# proposal (eight more forecasts) first.
plan_run() {
    local log=$OUT/logs/plan-$1-$3
    timed "$log" "$BENCH" "$2" --memory "$MEMORY" --plan --epochs "$3" --json --quiet ||
        die "hdmlp-bench --plan failed for N = $1: $(tail -3 "$log.err")"
    PLAN_S=$(json_get "$log.out" plan_seconds)
}

for n in $COUNTS; do
    check_room "$n" # again: the previous count's files are gone, others may have written
    log "N = $n: generating (load $(loadavg))"
    arc=$WORK/scale-$n.tar.zst
    ds=$WORK/scale-$n
    rm -rf "$arc" "$ds"
    t0=$(date +%s.%N)
    "$PY" "$HERE/scale_gen.py" "$n" --size "$SAMPLE_SIZE" --classes "$CLASSES" --seed 1 |
        zstd -1 -q -T1 -o "$arc" || die "cannot generate $n samples"
    gen_s=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }')
    arc_bytes=$(stat -c %s "$arc")

    log "N = $n: packing ($((arc_bytes >> 20)) MiB of .tar.zst, load $(loadavg))"
    load_pack=$(loadavg)
    timed "$OUT/logs/pack-$n" "$PACK" --chunk-size "$K" --seed "$PACK_SEED" --compress none \
        --threads 2 --quiet --force -o "$ds" "$arc" ||
        die "hdmlp-pack failed for N = $n: $(tail -3 "$OUT/logs/pack-$n.err")"
    pack="\"pack_s\": $T_WALL, \"pack_user_s\": $T_USER, \"pack_sys_s\": $T_SYS, \"pack_rss_kib\": $T_RSS_KIB"
    [ "$KEEP" = 1 ] || rm -f "$arc"
    index_bytes=$(stat -c %s "$ds/index")
    # the chunk size the packer chose (index header, offset 40), the per-chunk files' sizes
    k_used=$("$PY" -c 'import struct, sys; print(struct.unpack_from("<I", open(sys.argv[1], "rb").read(44), 40)[0])' "$ds/index")
    tables_bytes=$(stat -c %s "$ds/tables" 2>/dev/null || echo 0)
    keys_bytes=$(stat -c %s "$ds/keys" 2>/dev/null || echo 0)
    seg_bytes=$(du -cb "$ds"/segment-* | tail -1 | cut -f1)

    log "N = $n: loader, one epoch (bench_scale, load $(loadavg))"
    load_loader=$(loadavg)
    limit=()
    [ "$LOADER_SAMPLES" = 0 ] || limit=(--samples "$LOADER_SAMPLES")
    "$SCALE" "$ds" --memory "$MEMORY" "${limit[@]}" >"$OUT/logs/scale-$n.out" 2>"$OUT/logs/scale-$n.err" ||
        die "bench_scale failed for N = $n: $(tail -3 "$OUT/logs/scale-$n.err")"
    loader=$(last_json "$OUT/logs/scale-$n.out")
    loader_half=null
    bench='"bench_samples_per_s": null, "bench_peak_rss_bytes": null, "bench_wall_s": null'
    plan='"plan_probe_s": null, "plan_epochs_run": null, "plan_s": null, "plan_wall_s": null,'
    plan+=' "plan_cpu_s": null, "plan_rss_kib": null, "plan_extrapolated": false'
    load_plan="-"
    if [ "$LOADER_SAMPLES" = 0 ]; then
        # the same at half the budget: what of the loader's memory follows the budget
        "$SCALE" "$ds" --memory $((MEMORY / 2)) >"$OUT/logs/scale-half-$n.out" 2>"$OUT/logs/scale-half-$n.err" ||
            die "bench_scale (half budget) failed for N = $n: $(tail -3 "$OUT/logs/scale-half-$n.err")"
        loader_half=$(last_json "$OUT/logs/scale-half-$n.out")

        log "N = $n: hdmlp-bench, one epoch"
        timed "$OUT/logs/bench-$n" "$BENCH" "$ds" --memory "$MEMORY" --epochs 1 --json --quiet ||
            die "hdmlp-bench failed for N = $n: $(tail -3 "$OUT/logs/bench-$n.err")"
        bench="\"bench_samples_per_s\": $(json_get "$OUT/logs/bench-$n.out" samples_per_s),"
        bench+=" \"bench_peak_rss_bytes\": $(json_get "$OUT/logs/bench-$n.out" peak_rss_bytes),"
        bench+=" \"bench_wall_s\": $T_WALL"

        log "N = $n: forecast, probe of 2 epochs (load $(loadavg))"
        plan_run "$n" "$ds" 2
        probe_s=$PLAN_S
        est=$(awk -v s="$probe_s" -v e="$PLAN_EPOCHS" 'BEGIN { printf "%.0f", s / 2 * e }')
        if [ "$est" -le "$PLAN_MAX" ]; then
            epochs=$PLAN_EPOCHS
        else
            epochs=$(awk -v s="$probe_s" -v m="$PLAN_MAX" 'BEGIN { e = int(m / 2 / (s / 2)); print e < 2 ? 2 : e }')
        fi
        log "N = $n: forecast of $epochs epochs (~${est} s for $PLAN_EPOCHS at the probe's rate, load $(loadavg))"
        load_plan=$(loadavg)
        plan_run "$n" "$ds" "$epochs"
        plan="\"plan_probe_s\": $probe_s, \"plan_epochs_run\": $epochs, \"plan_s\": $PLAN_S,"
        plan+=" \"plan_wall_s\": $T_WALL, \"plan_cpu_s\": $(awk -v u="$T_USER" -v s="$T_SYS" 'BEGIN { print u + s }'),"
        plan+=" \"plan_rss_kib\": $T_RSS_KIB, \"plan_extrapolated\": $([ "$epochs" = "$PLAN_EPOCHS" ] && echo false || echo true)"
    fi

    echo "{\"samples\": $n, \"sample_size\": $SAMPLE_SIZE, \"classes\": $CLASSES, \"chunk_size\": $k_used," \
        "\"tables_bytes\": $tables_bytes, \"keys_bytes\": $keys_bytes," \
        "\"memory\": $MEMORY, \"gen_s\": $gen_s, \"archive_bytes\": $arc_bytes, $pack," \
        "\"index_bytes\": $index_bytes, \"segment_bytes\": $seg_bytes, \"loader\": $loader," \
        "\"loader_half_budget\": $loader_half, $bench, $plan," \
        "\"load\": {\"pack\": \"$load_pack\", \"loader\": \"$load_loader\", \"plan\": \"$load_plan\"}}" \
        >>"$OUT/runs.jsonl"
    [ "$KEEP" = 1 ] || rm -rf "$ds"
done

meta="{$(meta_host), \"git\": \"$(git_rev)\", \"counts\": \"$COUNTS\", \"memory\": $MEMORY,"
meta+=" \"plan_epochs\": $PLAN_EPOCHS, \"plan_max_s\": $PLAN_MAX, \"small\": $SMALL,"
meta+=" \"mem_total_kib\": $(awk '$1 == "MemTotal:" { print $2 }' /proc/meminfo)}"
mkdir -p "$(dirname "$JSON_OUT")"
"$PY" "$HERE/scale_report.py" "$OUT/runs.jsonl" --meta "$meta" --json "$JSON_OUT" |
    tee "$OUT/table.txt" || die "the report failed"
log "JSON: $JSON_OUT"
