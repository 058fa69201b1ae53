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
bash .ci/check_style.sh

step "tests"
(cd build-ci && ctest -j"$jobs" --output-on-failure) 2>&1 | tee build-ci/ctest.log

if [ "${FAST:-0}" != 1 ]; then
    # Under ASan the MPI tests trip on OpenMPI's own leaks (in modules it loads without
    # names, which LeakSanitizer cannot suppress), the hostile-RPC flood's RSS bounds do not
    # hold with ASan's shadow memory, and the Python suite takes minutes: they run in the
    # main pass above; FULL_SANITIZE=1 includes them here too.
    asan_skip='^bench_|^dist_|^hostile_rpc$|^python_tests$'
    if [ "${FULL_SANITIZE:-0}" = 1 ]; then asan_skip='^bench_'; fi
    step "tests under ASan+UBSan"
    build build-ci-asan -DCMAKE_BUILD_TYPE=Debug -DHDMLP_SANITIZE=address,undefined
    (cd build-ci-asan && ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions="$root/tests/lsan.supp" \
        UBSAN_OPTIONS=print_stacktrace=1 \
        ctest -j"$jobs" --output-on-failure -E "$asan_skip")

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
