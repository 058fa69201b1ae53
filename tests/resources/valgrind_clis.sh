#!/usr/bin/env bash
# Valgrind (memcheck) over the command-line tools and the C example on a small dataset:
# zero errors and no definite leaks.
#
#   bash tests/resources/valgrind_clis.sh PACK ITERATE BENCH [SCRATCH]
#
# PACK = hdmlp-pack, ITERATE = examples' hdmlp_example_iterate, BENCH = hdmlp-bench.
# Runs under `valgrind --leak-check=full --errors-for-leak-kinds=definite
# --error-exitcode=99`: hdmlp-pack packing a directory (2 threads, with a dictionary), a
# tar and a list, --info, --verify, --extract (by index and by key, and of a missing key);
# hdmlp_example_iterate; hdmlp-bench --epochs 2 (auto/io_uring and pread engines, budgets
# below the dataset so chunks are refilled). Exit 77 (skip) when valgrind is missing.
# Environment: HDMLP_KEEP=1 keeps the scratch directory and the valgrind logs.
set -u
set -o pipefail

if [ $# -lt 3 ]; then
    echo "usage: $0 PACK ITERATE BENCH [SCRATCH]" >&2
    exit 2
fi
PACK=$1 ITERATE=$2 BENCH=$3
if ! command -v valgrind >/dev/null; then
    echo "valgrind_clis: SKIP: valgrind not installed"
    exit 77
fi
if [ -n "${4:-}" ]; then
    T=$4/valgrind_clis
    rm -rf "$T"
    mkdir -p "$T"
else
    T=$(mktemp -d "${TMPDIR:-/tmp}/hdmlp-valgrind.XXXXXX")
fi
T=$(cd "$T" && pwd)
mkdir -p "$T/logs"

runs=0
fail() {
    echo "valgrind_clis: FAIL: $*" >&2
    echo "(scratch and logs kept in $T)" >&2
    exit 1
}

# vg NAME EXPECTED_EXIT CMD...: runs CMD under memcheck; the command must exit with
# EXPECTED_EXIT and valgrind must report no error and no definite leak.
vg() {
    local name=$1 want=$2
    shift 2
    local log=$T/logs/$name.log
    valgrind --quiet --leak-check=full --show-leak-kinds=definite \
        --errors-for-leak-kinds=definite --error-exitcode=99 --track-origins=yes \
        --log-file="$log" "$@" >"$T/logs/$name.out" 2>"$T/logs/$name.err"
    local rc=$?
    if [ "$rc" = 99 ] || grep -qE 'ERROR SUMMARY: [1-9]|definitely lost: [1-9]' "$log"; then
        cat "$log" >&2
        fail "$name: valgrind reported errors or leaks ($*)"
    fi
    if [ "$rc" != "$want" ]; then
        cat "$T/logs/$name.err" >&2
        fail "$name: exit $rc, expected $want ($*)"
    fi
    runs=$((runs + 1))
    echo "valgrind_clis: $name ok"
}

# ---- a small tree: 4 labels, 160 samples (compressible and random) ----------------------
for l in 0 1 2 3; do
    mkdir -p "$T/in/label$l"
    for i in $(seq 0 39); do
        if [ $((i % 2)) = 0 ]; then
            head -c $((i * 97 + 10)) /dev/urandom >"$T/in/label$l/s$i.bin"
        else
            yes "label $l sample $i" | head -c $((i * 131 + 5)) >"$T/in/label$l/s$i.txt"
        fi
    done
done
tar -cf "$T/in.tar" -C "$T/in" .
(cd "$T" && find in -type f | LC_ALL=C sort | awk -F/ '{print $0 "\t" $2}') >"$T/in.list"

vg pack_dir 0 "$PACK" --quiet --threads 2 --chunk-size 8 --dict --seed 1 -o "$T/ds" "$T/in"
vg pack_tar 0 "$PACK" --quiet --threads 2 --chunk-size 16 --segment-size 0 --seed 2 \
    -o "$T/ds_tar" "$T/in.tar"
vg pack_list 0 "$PACK" --quiet --threads 1 --compress none --seed 3 -o "$T/ds_list" \
    --list "$T/in.list"
vg pack_fail 1 "$PACK" --quiet -o "$T/ds" "$T/in" # OUT exists: a failure path
vg info 0 "$PACK" --info "$T/ds"
vg verify 0 "$PACK" --verify "$T/ds"
vg verify_tar 0 "$PACK" --verify "$T/ds_tar"
vg extract_index 0 "$PACK" --extract "$T/ds" 5 -o "$T/x5"
vg extract_key 0 "$PACK" --extract "$T/ds" label1/s3.txt -o "$T/x_key"
cmp -s "$T/x_key" "$T/in/label1/s3.txt" || fail "--extract by key gave other bytes"
vg extract_missing 1 "$PACK" --extract "$T/ds" no/such/key
vg iterate 0 "$ITERATE" "$T/ds"
# budgets below the dataset's raw bytes, so the loader refills chunks (and the RAM cache
# stays off)
vg bench_uring 0 "$BENCH" "$T/ds" --memory 40% --batch 4 --epochs 2 --threads 2 --quiet
vg bench_pread 0 "$BENCH" "$T/ds_tar" --memory 50% --batch 5 --epochs 2 --threads 2 \
    --engine pread --json

echo "valgrind_clis: PASS ($runs runs, 0 errors, no definite leaks)"
if [ "${HDMLP_KEEP:-0}" != 1 ]; then
    rm -rf "$T"
fi
