#!/usr/bin/env bash
# Builds the libFuzzer targets (ASan + UBSan) and runs each for ${FUZZ_SECONDS:-30} s on a
# copy of its seed corpus. Exits non-zero if a build fails or a target finds a crash.
#
#   tests/fuzz/run.sh                 build and fuzz every target
#   tests/fuzz/run.sh index           only fuzz_index (names: index, chunk, rpc, list, archive,
#                                     image, manifest)
#   tests/fuzz/run.sh --gen-corpus    regenerate tests/fuzz/corpus/* (no fuzzing)
#   tests/fuzz/run.sh --gen-corpus index   regenerate only tests/fuzz/corpus/index
#
# Needs clang with the libFuzzer runtime (Debian: clang-14 + libclang-rt-14-dev); fuzz_rpc
# also needs protoc-c and libprotobuf-c-dev, fuzz_list, fuzz_archive and fuzz_manifest libarchive-dev,
# fuzz_image libturbojpeg0-dev and libspng-dev.
# Long runs and the regression replay: tests/fuzz/README.md.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
CC=${FUZZ_CC:-clang}
seconds=${FUZZ_SECONDS:-30}
targets=(index chunk rpc list archive image manifest)
work=$(mktemp -d "${TMPDIR:-/tmp}/hdmlp-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT

srcs=(format/*.c format/base/*.c)
common=(-g -D_GNU_SOURCE -std=c11 -I include -I format/base -I format)
libs=(-lzstd -lxxhash)

# Extra sources, flags and libraries of one target (fuzz_rpc: the protobuf-c codec).
extra=()
target_extra() {
    extra=()
    if [ "$1" = rpc ]; then
        mkdir -p "$work/gen"
        protoc-c --proto_path=rpc --c_out="$work/gen" rpc/hdmlp.proto
        extra=(-I loader/ranks -I rpc -I "$work/gen" rpc/rpc_codec.c "$work/gen/hdmlp.pb-c.c"
            -lprotobuf-c)
    fi
    if [ "$1" = list ] || [ "$1" = archive ] || [ "$1" = manifest ]; then # the packer library (packer/pack_*.c), not its CLI
        extra=(-I packer packer/pack_*.c -larchive -lturbojpeg -lspng -lm -lpthread)
    fi
    if [ "$1" = image ]; then # the image pipeline's decode and augmentation
        extra=(-I loader/image loader/image/loader_image_{decode,jpeg,aug,config,resize}.c -lturbojpeg -ljpeg -lspng
            -lm)
    fi
}

if [ "${1:-}" = "--gen-corpus" ]; then
    shift
    if [ $# -gt 0 ]; then
        targets=("$@")
    fi
    for t in "${targets[@]}"; do
        if [ ! -f "tests/fuzz/fuzz_$t.c" ]; then
            echo "fuzz: no target $t (tests/fuzz/fuzz_$t.c)" >&2
            exit 2
        fi
        target_extra "$t"
        "$CC" -O1 "${common[@]}" -DFUZZ_GEN_CORPUS "${srcs[@]}" "tests/fuzz/fuzz_$t.c" \
            "${extra[@]}" "${libs[@]}" -o "$work/gen_$t"
        rm -rf "tests/fuzz/corpus/$t"
        mkdir -p "tests/fuzz/corpus/$t"
        "$work/gen_$t" "tests/fuzz/corpus/$t"
        echo "fuzz: wrote $(ls "tests/fuzz/corpus/$t" | wc -l) seeds to tests/fuzz/corpus/$t"
    done
    exit 0
fi
if [ $# -gt 0 ]; then
    targets=("$@")
fi

if ! echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }' |
    "$CC" -x c -fsanitize=fuzzer - -o "$work/probe" 2>"$work/probe.log"; then
    echo "fuzz: $CC cannot link -fsanitize=fuzzer (install libclang-rt-14-dev):" >&2
    cat "$work/probe.log" >&2
    exit 2
fi

status=0
for t in "${targets[@]}"; do
    src="tests/fuzz/fuzz_$t.c"
    if [ ! -f "$src" ]; then
        echo "fuzz: no target $t ($src)" >&2
        exit 2
    fi
    echo "fuzz: building fuzz_$t"
    target_extra "$t"
    "$CC" -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
        "${common[@]}" "${srcs[@]}" "$src" "${extra[@]}" "${libs[@]}" -o "$work/fuzz_$t"
    mkdir -p "$work/corpus_$t" "$work/artifacts_$t"
    if [ -d "tests/fuzz/corpus/$t" ]; then
        cp -r "tests/fuzz/corpus/$t/." "$work/corpus_$t/"
    fi
    echo "fuzz: running fuzz_$t for ${seconds}s"
    if ! "$work/fuzz_$t" -max_total_time="$seconds" -max_len=8192 -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$work/artifacts_$t/" "$work/corpus_$t" >"$work/log_$t" 2>&1; then
        echo "fuzz: fuzz_$t FAILED; last lines of its log:" >&2
        tail -n 60 "$work/log_$t" >&2
        mkdir -p "$root/build-fuzz-artifacts"
        cp -r "$work/artifacts_$t/." "$root/build-fuzz-artifacts/" 2>/dev/null || true
        echo "fuzz: crashing inputs copied to build-fuzz-artifacts/" >&2
        status=1
    else
        grep -E 'stat::number_of_executed_units|stat::peak_rss_mb|cov:' "$work/log_$t" |
            tail -n 3 || true
        echo "fuzz: fuzz_$t ok"
    fi
done
exit $status
