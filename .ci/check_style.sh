#!/usr/bin/env bash
# Structural checks from STYLE.md / DESIGN.md §2: formatting and dependency direction (the
# layering rules of README "Layout": .ci/check_layers.py, from includes and, given a build
# directory ($HDMLP_BUILD, else build-ci/ or build/), from the built objects' symbols).
set -uo pipefail
cd "$(dirname "$0")/.."
fail=0
files=$(git ls-files '*.c' '*.h' | grep -v '^tests/fuzz/corpus/')
if ! clang-format --dry-run --Werror $files 2>/tmp/hdmlp-format.log; then
    echo "check_style: files not formatted with .clang-format:" >&2
    grep -o '^[^:]*\.[ch]' /tmp/hdmlp-format.log | sort -u >&2
    fail=1
fi
# module -> headers it must not include (but those matching the optional 4th pattern)
check() {
    local dir=$1 pattern=$2 why=$3 allowed=${4:-}
    local hits
    hits=$(git ls-files "$dir" | grep -E '\.[ch]$' | xargs -r grep -nE "#include\s*[<\"]($pattern)" || true)
    if [ -n "$allowed" ] && [ -n "$hits" ]; then
        hits=$(echo "$hits" | grep -vE "#include\s*[<\"]($allowed)[>\"]" || true)
    fi
    if [ -n "$hits" ]; then
        echo "check_style: $why:" >&2
        echo "$hits" >&2
        fail=1
    fi
}
check format/ 'loader|packer|rpc|pthread|grpc/|protobuf-c/|mpi\.h|archive' "format/ works on buffers only and depends on nothing above it"
check loader/ 'pack_|packer|grpc/|protobuf-c/|mpi\.h|archive' "loader/ must not depend on packer/ or rpc/ internals"
# loader_units.h: the size grammar the CLIs and Python compile in (libc only, not libhdmlp).
check packer/ 'loader_|grpc/|protobuf-c/|mpi\.h' "packer/ must not depend on loader internals or rpc/" 'loader_units\.h'
check loader/cli/ 'format\.h|loader|pack_|fmt_|rpc_' "hdmlp-bench (loader/cli/) uses the public header only" 'loader_units\.h'
check examples/ 'format\.h|loader|pack_|fmt_' "examples use the public header only"
check python/ 'format\.h|loader|pack_|fmt_' "python/ uses the public header only" 'loader_units\.h'
# library code never prints or exits
hits=$(git ls-files format loader | grep -E '\.c$' | grep -vE '_main\.c$|^loader/cli/' |
       xargs -r grep -nE '\b(printf|fprintf|puts|perror|abort|exit)\s*\(' | grep -v snprintf || true)
if [ -n "$hits" ]; then
    echo "check_style: library code prints or exits:" >&2
    echo "$hits" >&2
    fail=1
fi
# tests/lsan.supp suppresses leaks from vasprintf (OpenMPI's): hdmlp must not allocate with it
hits=$(git ls-files '*.c' '*.h' | grep -v '^tests/fuzz/corpus/' | xargs -r grep -nE '\bv?asprintf\s*\(' || true)
if [ -n "$hits" ]; then
    echo "check_style: asprintf/vasprintf (their leaks are suppressed under ASan; use malloc+snprintf):" >&2
    echo "$hits" >&2
    fail=1
fi
# the layering rules of README "Layout"
if ! python3 .ci/check_layers.py; then
    fail=1
fi
exit $fail
