#!/usr/bin/env bash
# image_bench.sh: images/s to a 224x224 RandomResizedCrop + flip uint8 batch from natural
# photographs (tests/bench/image_data.py): hdmlp's image pipeline (C decode threads) vs
# torchvision's ImageFolder + PIL transforms in 2 DataLoader workers vs hdmlp's bytes + the
# same PIL transforms in 2 workers; warm (files and packs in the page cache) and cold in
# the benchmark cell (bench_lib.sh, regime A: 150 read ops/s + 400 MB/s); throughput vs the
# loader's thread split (automatic vs manual).
#
#   sudo tests/bench/image_bench.sh [--build DIR] [--out DIR] [--work DIR] [--keep-data]
#                                   [--count 4000] [--subset 4000] [--repeat 2] [--small]
#                                   [--train 20000] [--sections "warm split cold floor"]
#                                   [--compare-build DIR]
#
# Data: 20,000 train crops (mean ~105 KiB, ~450 x 390 px, 19 classes; image_data.py,
# which needs mate-backgrounds and python3-skimage: installed here with apt-get when
# missing), packed with K = 64, uncompressed ("orig"), and again with
# --image-max-side 256 --image-quality 90 ("prep", pack-time preparation); ImageFolder
# gets the same prepared bytes as files (extracted from the pack) for its "prep" runs.
# Warm: each contender takes --count images (after a read of every file into the page
# cache), --repeat rounds, medians. hdmlp: memory 25 % of the raw bytes + 256 MiB (the
# 224x224 output buffers must fit in half the budget), I/O threads 2, decode threads
# automatic.
# Cold, regime A: one whole epoch of a --subset-image subset (every 5th file) per
# contender, caches dropped, cell memory = 25 % of the subset's bytes + 768 MiB for the
# Python processes (one figure for all; the disk bytes in the table show what each read).
# Floor (issue 29): on the photographs and on a set of small JPEGs (image_data.py --small:
# quality 90, 4:2:0, 360-500 px, ~20-40 KiB), in the same run and interleaved, round by
# round: libjpeg-turbo alone decoding the same --count files on 2 threads (jpeg_floor.c,
# built here; the decode-only floor of these cores under their current load), the hdmlp
# pipeline on the pack of those files, and ImageFolder (W = 2); the report gives the
# pipeline's share of the floor and its ratio to ImageFolder, by wall time (what these cores
# gave each under the load of the moment: on a busy machine a contender with more runnable
# threads gets a larger share) and by CPU time per image (load-independent: jpeg_floor's
# one-thread CPU time against the pipeline process's, consumer and I/O included).
# --compare-build DIR: the pipeline of another build (its python/ directory) too, as
# "hdmlp-base", interleaved with the others (before/after a change, in one run).
# --small: --count 1500, --subset 1500, 1 round. --train: training images per set (val is a
# tenth). --sections: which parts run (warm: the contenders warm; split: the thread splits;
# cold: regime A; floor: floor, pipeline and ImageFolder on both sets).
# Writes OUT/results.jsonl and OUT/table.txt (image_report.py renders it).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BENCH_NAME=image_bench
# shellcheck source-path=SCRIPTDIR source=bench_lib.sh
. "$HERE/bench_lib.sh"
OUT=image-bench-out
WORK=${TMPDIR:-/var/tmp}/hdmlp-image-bench
COUNT=4000
SUBSET=4000
REPEAT=2
SECTIONS="warm split cold floor"
TRAIN=20000
BASE_BUILD=
while [ $# -gt 0 ]; do
    case $1 in
    --sections) SECTIONS=${2:?}; shift 2 ;;
    --count) COUNT=${2:?}; shift 2 ;;
    --subset) SUBSET=${2:?}; shift 2 ;;
    --repeat) REPEAT=${2:?}; shift 2 ;;
    --train) TRAIN=${2:?}; shift 2 ;;
    --compare-build) BASE_BUILD=${2:?}; shift 2 ;;
    *) bench_option "$@"; shift "$BENCH_SHIFT" ;;
    esac
done
if [ "$SMALL" = 1 ]; then COUNT=1500; SUBSET=1500; REPEAT=1; fi
bench_need_root "apt-get, cgroup cells, dropping caches"
bench_tools
bench_dirs
bench_traps :
cell_init "image_bench$$"
cell_disk "$WORK"
"$PY" -c 'import torch, torchvision, PIL' 2>/dev/null || skip "needs torch, torchvision and PIL"
export PYTHONPATH="$BUILD/python${PYTHONPATH:+:$PYTHONPATH}"
"$PY" -c 'import hdmlp.torch; hdmlp.ImagePipeline' 2>/dev/null ||
    die "$PY cannot import hdmlp.torch with ImagePipeline from $BUILD/python"
DRIVE=("$PY" -W ignore "$HERE/image_bench.py")

# ---- data ---------------------------------------------------------------------------------
missing=()
for p in mate-backgrounds python3-skimage; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]} (the source photographs)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" \
        >"$OUT/logs/apt.log" 2>&1 || die "apt-get install ${missing[*]} failed (see $OUT/logs/apt.log)"
fi
VAL=$((TRAIN / 10))
if [ "$(cat "$WORK/data.done" 2>/dev/null)" != "$TRAIN $VAL 1" ]; then
    log "making the dataset (image_data.py: $TRAIN + $VAL JPEGs)"
    rm -rf "$WORK/data"
    nice -n 5 "$PY" "$HERE/image_data.py" "$WORK/data" --train "$TRAIN" --val "$VAL" --seed 1 \
        -j 2 >"$OUT/logs/image_data.log" || die "image_data.py failed"
    echo "$TRAIN $VAL 1" >"$WORK/data.done"
fi
cat "$OUT/logs/image_data.log" 2>/dev/null >&2
want() { case " $SECTIONS " in *" $1 "*) return 0 ;; esac; return 1; }
pack orig "$WORK/data/train" 64
# the prepared pack and its files (warm), the subset (cold): made only for those sections
if want warm && { [ ! -f "$WORK/prep/index" ] || [ "$WORK/prep" -ot "$WORK/orig/index" ]; }; then
    log "packing prep (--image-max-side 256 --image-quality 90)"
    "$PACK" --chunk-size 64 --seed "$PACK_SEED" --compress none --threads 2 --quiet --force \
        --image-max-side 256 --image-quality 90 -o "$WORK/prep" "$WORK/data/train" ||
        die "packing prep failed"
fi
# prep_files DIR DATASET: the dataset's samples as files under DIR/KEY (ImageFolder's input)
if want warm && [ ! -f "$WORK/prep_files.done" ]; then
    log "extracting the prepared JPEGs for ImageFolder"
    rm -rf "$WORK/prep_files"
    "$PY" - "$WORK/prep" "$WORK/prep_files" <<'EOF' || die "extracting prep failed"
import os, sys
import hdmlp
ds, out = hdmlp.Dataset(sys.argv[1]), sys.argv[2]
for i in range(len(ds)):
    key = ds.info(i)["key"].decode()
    os.makedirs(os.path.join(out, os.path.dirname(key)), exist_ok=True)
    with open(os.path.join(out, key), "wb") as f:
        f.write(ds[i])
EOF
    touch "$WORK/prep_files.done"
fi
# the cold subset: every 5th training file (hard links), packed
if want cold && [ "$(cat "$WORK/sub.done" 2>/dev/null)" != "$SUBSET" ]; then
    rm -rf "$WORK/sub" "$WORK/sub_ds"
    (cd "$WORK/data/train" && find . -type f -name '*.jpg' | LC_ALL=C sort | awk 'NR % 5 == 1' |
        head -n "$SUBSET" | while read -r f; do
            mkdir -p "$WORK/sub/$(dirname "$f")" && ln "$f" "$WORK/sub/$f"
        done)
    echo "$SUBSET" >"$WORK/sub.done"
fi
sub_bytes=0
if want cold; then
    pack sub_ds "$WORK/sub" 64
    sub_bytes=$(find "$WORK/sub" -type f -printf '%s\n' | awk '{ s += $1 } END { print s }')
fi
orig_bytes=$(find "$WORK/data/train" -type f -printf '%s\n' | awk '{ s += $1 } END { print s }')

RES=$OUT/results.jsonl
: >"$RES"
echo "{\"meta\": {$(meta_host), \"rev\": \"$(git_rev)\", \"count\": $COUNT, \"subset\": $SUBSET, \"repeat\": $REPEAT, \"orig_bytes\": $orig_bytes, \"subset_bytes\": $sub_bytes}}" >>"$RES"
mem_for() { # 25 % of a dataset's bytes + 256 MiB for the loader's 224x224 output buffers
    # (prefetch 2 + the batches held, 128 x 224 x 224 x 3 bytes each; it needs them within
    # half its budget, and with + 160 MiB a loop holding one batch ran out of budget)
    echo $(($1 / 4 + (256 << 20)))
}
prep_bytes=$(du -sb "$WORK/prep" 2>/dev/null | cut -f1)

# record SECTION TAG JSON-LINE
record() {
    echo "{\"section\": \"$1\", \"tag\": \"$2\", \"load\": \"$(loadavg)\", \"result\": ${3:-null}}" >>"$RES"
}
warm_files() { find "$@" -type f -print0 | xargs -0 cat >/dev/null; }

# ---- warm ---------------------------------------------------------------------------------
if want warm || want split; then
    log "warming the page cache"
    warm_files "$WORK/data/train" "$WORK/prep_files" "$WORK/orig" "$WORK/prep"
fi
for round in $(seq 1 "$REPEAT"); do
    want warm || break
    for c in hdmlp:orig imagefolder:orig hdmlp-pil:orig hdmlp:prep imagefolder:prep; do
        who=${c%%:*} data=${c#*:}
        case $who:$data in
        hdmlp:orig) args=(hdmlp "$WORK/orig" --memory "$(mem_for "$orig_bytes")") ;;
        hdmlp:prep) args=(hdmlp "$WORK/prep" --memory "$(mem_for "$prep_bytes")") ;;
        hdmlp-pil:orig) args=(hdmlp-pil "$WORK/orig" --workers 2 --memory "$(mem_for "$orig_bytes")") ;;
        imagefolder:orig) args=(imagefolder "$WORK/data/train" --workers 2) ;;
        imagefolder:prep) args=(imagefolder "$WORK/prep_files" --workers 2) ;;
        esac
        log "warm round $round/$REPEAT: $who on $data (load $(loadavg))"
        nice -n 5 "${DRIVE[@]}" "${args[@]}" --count "$COUNT" >"$OUT/logs/warm-$c-$round.out" \
            2>"$OUT/logs/warm-$c-$round.err" || log "  failed: $(tail -1 "$OUT/logs/warm-$c-$round.err")"
        record warm "$c" "$(last_json "$OUT/logs/warm-$c-$round.out")"
    done
done
for round in $(seq 1 "$REPEAT"); do
    want split || break
    # thread split: automatic (0) vs manual decode threads, with 1 or 2 I/O threads
    for split in 2:0 1:1 1:2 2:1 2:2 1:3; do
        io=${split%%:*} dec=${split#*:}
        log "split round $round/$REPEAT: io $io decode $dec (load $(loadavg))"
        nice -n 5 "${DRIVE[@]}" hdmlp "$WORK/orig" --io-threads "$io" --threads "$dec" \
            --memory "$(mem_for "$orig_bytes")" --count "$COUNT" \
            >"$OUT/logs/split-$split-$round.out" 2>"$OUT/logs/split-$split-$round.err"
        record split "$split" "$(last_json "$OUT/logs/split-$split-$round.out")"
    done
done

# ---- floor: libjpeg-turbo alone vs the pipeline vs ImageFolder, both sets ------------------
if want floor; then
    if [ "$(cat "$WORK/small.done" 2>/dev/null)" != "$TRAIN 2" ]; then
        log "making the small set (image_data.py --small: $TRAIN JPEGs)"
        rm -rf "$WORK/small"
        nice -n 5 "$PY" "$HERE/image_data.py" "$WORK/small" --small --train "$TRAIN" --val 0 \
            --seed 2 -j 2 >"$OUT/logs/image_data_small.log" || die "image_data.py --small failed"
        echo "$TRAIN 2" >"$WORK/small.done"
    fi
    pack small_ds "$WORK/small/train" 64
    FLOOR=$OUT/jpeg_floor
    cc -O2 -pthread -o "$FLOOR" "$HERE/jpeg_floor.c" -lturbojpeg -ljpeg || die "cannot build jpeg_floor"
    for set in photos small; do
        case $set in
        photos) dir=$WORK/data/train ds=$WORK/orig ;;
        small) dir=$WORK/small/train ds=$WORK/small_ds ;;
        esac
        # the files the floor decodes: a sample of COUNT across the set (every k-th)
        (cd "$dir" && find . -type f -name '*.jpg' | LC_ALL=C sort) >"$OUT/files-$set.txt"
        total=$(wc -l <"$OUT/files-$set.txt")
        step=$((total / COUNT > 1 ? total / COUNT : 1))
        awk -v s="$step" -v d="$dir" 'NR % s == 0 { print d "/" substr($0, 3) }' \
            "$OUT/files-$set.txt" | head -n "$COUNT" >"$OUT/floor-$set.txt"
    done
    dir_bytes() { find "$1" -type f -printf '%s\n' | awk '{ s += $1 } END { print s }'; }
    bytes_photos=$(dir_bytes "$WORK/data/train")
    bytes_small=$(dir_bytes "$WORK/small/train")
    log "warming the page cache (floor)"
    warm_files "$WORK/data/train" "$WORK/small/train" "$WORK/orig" "$WORK/small_ds"
    for round in $(seq 1 "$REPEAT"); do
        for set in photos small; do
            case $set in
            photos) dir=$WORK/data/train ds=$WORK/orig b=$bytes_photos ;;
            small) dir=$WORK/small/train ds=$WORK/small_ds b=$bytes_small ;;
            esac
            for who in floor hdmlp ${BASE_BUILD:+hdmlp-base} imagefolder; do
                tag=$set:$who
                log "floor round $round/$REPEAT: $who on $set (load $(loadavg))"
                case $who in
                floor) nice -n 5 "$FLOOR" 2 <"$OUT/floor-$set.txt" ;;
                hdmlp) nice -n 5 "${DRIVE[@]}" hdmlp "$ds" --memory "$(mem_for "$b")" \
                    --count "$COUNT" ;;
                hdmlp-base) PYTHONPATH="$BASE_BUILD/python" nice -n 5 "${DRIVE[@]}" hdmlp "$ds" \
                    --memory "$(mem_for "$b")" --count "$COUNT" ;;
                imagefolder) nice -n 5 "${DRIVE[@]}" imagefolder "$dir" --workers 2 \
                    --count "$COUNT" ;;
                esac >"$OUT/logs/floor-$set-$who-$round.out" 2>"$OUT/logs/floor-$set-$who-$round.err" ||
                    log "  failed: $(tail -1 "$OUT/logs/floor-$set-$who-$round.err")"
                record floor "$tag" "$(last_json "$OUT/logs/floor-$set-$who-$round.out")"
            done
        done
    done
fi

# ---- cold, regime A ---------------------------------------------------------------------
prewarm() { :; }
cellmem=$((sub_bytes / 4 + (768 << 20)))
for round in $(seq 1 "$REPEAT"); do
    want cold || break
    for who in hdmlp imagefolder hdmlp-pil; do
        case $who in
        hdmlp) args=(hdmlp "$WORK/sub_ds" --memory "$(mem_for "$sub_bytes")") ;;
        hdmlp-pil) args=(hdmlp-pil "$WORK/sub_ds" --workers 2 --memory "$(mem_for "$sub_bytes")") ;;
        imagefolder) args=(imagefolder "$WORK/sub" --workers 2) ;;
        esac
        tag=A-$who-$round
        log "cold round $round/$REPEAT: regime A $who (load $(loadavg))"
        cell_run "$tag" "$cellmem" 400000000 150 -- nice -n 5 "${DRIVE[@]}" "${args[@]}"
        echo "{\"section\": \"A\", \"tag\": \"$who\", \"load\": \"$(loadavg)\", \"cell\": $CELL_JSON, \"result\": $(last_json "$OUT/logs/$tag.out" || echo null)}" >>"$RES"
    done
done
"$PY" "$HERE/image_report.py" "$RES" | tee "$OUT/table.txt"
