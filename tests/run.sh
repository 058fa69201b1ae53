#!/usr/bin/env bash
# The whole test suite: dependencies, a warnings-as-errors build, the Criterion and CLI
# tests, style and dependency checks, the suite again under ASan+UBSan, the threaded tests
# under TSan, and short fuzz runs. Usage: bash tests/run.sh   (FAST=1 skips sanitizers/fuzz)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=$(nproc)

step() { printf '\n==== %s\n' "$*"; }

step "dependencies"
bash .ci/deps.sh

build() { # build DIR [cmake args...]
    local dir=$1
    shift
    cmake -S "$root" -B "$dir" -DHDMLP_WERROR=ON -DPython3_EXECUTABLE=/usr/bin/python3 "$@" >/dev/null
    cmake --build "$dir" -j"$jobs" 2>&1 | grep -E 'warning|error|Error' || true
    cmake --build "$dir" -j"$jobs" >/dev/null
}

step "build (RelWithDebInfo, -Werror)"
build build-ci

step "style and dependency checks"
HDMLP_BUILD=build-ci bash .ci/check_style.sh

step "tests"
(cd build-ci && ctest -j"$jobs" --output-on-failure) 2>&1 | tee build-ci/ctest.log

if [ "${FAST:-0}" != 1 ]; then
    # The whole suite but the benchmarks, in short form (HDMLP_TEST_SHORT=1: less data where
    # a test's time grows with it; shorter hostile floods); FULL_SANITIZE=1: full size.
    # ASan/LSan reports go to files, so that one from a process whose exit status no test
    # checks fails the pass too; UBSan findings abort (-fno-sanitize-recover=all). MPI ranks
    # get the no-op dlclose of tests/support/nodlclose.c (see tests/lsan.supp).
    # intercept_tls_get_addr=0: GCC 12's LeakSanitizer can misread a dynamic TLS block's
    # bounds and crash at exit.
    step "tests under ASan+UBSan"
    build build-ci-asan -DCMAKE_BUILD_TYPE=Debug -DHDMLP_SANITIZE=address,undefined
    short=(HDMLP_TEST_SHORT=1 HDMLP_HOSTILE_SECONDS=2)
    if [ "${FULL_SANITIZE:-0}" = 1 ]; then short=(); fi
    logs=$root/build-ci-asan/sanitizer-logs
    rm -rf "$logs" && mkdir -p "$logs"
    rc=0
    (cd build-ci-asan && env "${short[@]}" \
        ASAN_OPTIONS=detect_leaks=1:intercept_tls_get_addr=0:log_path="$logs/asan" \
        LSAN_OPTIONS=suppressions="$root/tests/lsan.supp":print_suppressions=0 \
        UBSAN_OPTIONS=print_stacktrace=1 \
        OMPI_MCA_mca_base_env_list="LD_PRELOAD=$(cc -print-file-name=libasan.so):$root/build-ci-asan/tests/libhdmlp_test_nodlclose.so" \
        ctest -j"$jobs" --output-on-failure -E '^bench_') || rc=$?
    # An empty log holds no report (a process was killed between opening it and writing, as
    # seen once in CI with every test passing): named, not counted.
    find "$logs" -type f -empty -printf 'sanitizer: empty log %f ignored\n' -delete >&2
    # LeakSanitizer's "Unable to get registers from thread N" is a note, not a finding: a
    # thread was leaving while the exit-time leak check stopped the world, and its
    # whole stack was then scanned as reachable. A log holding nothing else is shown, not
    # counted; any other line in it still fails the pass.
    for f in "$logs"/*; do
        [ -e "$f" ] || continue
        if ! grep -qv -E '^==[0-9]+==Unable to get registers from thread [0-9]+\.$' "$f"; then
            echo "sanitizer: note only in $(basename "$f"): $(tr '\n' ' ' < "$f")" >&2
            rm -f "$f"
        fi
    done
    if [ -n "$(ls "$logs")" ]; then
        cat "$logs"/*
        echo "sanitizer reports: $(ls "$logs" | wc -l) (in $logs)" >&2
        rc=1
    fi
    [ "$rc" = 0 ] || exit "$rc"

    # Criterion cannot start under TSan, so the threaded paths have plain-C stress programs
    # (ctest label "threads").
    step "threaded stress under TSan"
    build build-ci-tsan -DCMAKE_BUILD_TYPE=Debug -DHDMLP_SANITIZE=thread -DHDMLP_PYTHON=OFF
    (cd build-ci-tsan && TSAN_OPTIONS=halt_on_error=1 ctest -j"$jobs" --output-on-failure -L threads)

    if [ -f tests/fuzz/run.sh ]; then
        step "fuzzing (short)"
        FUZZ_SECONDS=${FUZZ_SECONDS:-20} bash tests/fuzz/run.sh
    fi
fi

step "summary"
grep -E "tests passed|tests failed" build-ci/ctest.log | tail -n 1
