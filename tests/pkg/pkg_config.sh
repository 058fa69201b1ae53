#!/bin/bash
# C against the installed library, as the README's "Compile against it" says: `cmake
# --install BUILD --prefix P`, then examples/iterate.c compiled with pkg-config and run on a
# dataset the installed hdmlp-pack made, with no ldconfig and no LD_LIBRARY_PATH:
#   pkg-config --cflags --libs hdmlp             (the .pc carries -Wl,-rpath to its libdir)
#   ... -Wl,-rpath,$(pkg-config --variable=libdir hdmlp)     (the form for HDMLP_PC_RPATH=OFF)
#   pkg-config --static --cflags --libs hdmlp    links and runs
#   pkg-config --cflags --libs hdmlp-static      links libhdmlp.a: no libhdmlp.so.0 needed
# `pkg-config --cflags hdmlp` is the include directory and nothing else (no OpenMPI or gRPC
# flags). The installed hdmlp-bench runs, and the installed Python package (if PYTHON is
# given and it was built) packs with the installed hdmlp-pack.
#
#   pkg_config.sh BUILD SOURCE SCRATCH CC [PYTHON]
set -uo pipefail
BUILD=$1 SOURCE=$2 SCRATCH=$3 CC=$4 PY=${5:-}

fail() {
    echo "[pkg_config] FAIL: $*" >&2
    exit 1
}
step() { echo "[pkg_config] $*"; }

command -v pkg-config >/dev/null || fail "pkg-config not installed (bash .ci/deps.sh)"
rm -rf "$SCRATCH"
mkdir -p "$SCRATCH"
P=$SCRATCH/prefix
unset LD_LIBRARY_PATH LD_PRELOAD PKG_CONFIG_PATH PYTHONPATH HDMLP_PACK HDMLP_BENCH

step "cmake --install $BUILD --prefix $P"
cmake --install "$BUILD" --prefix "$P" >"$SCRATCH/install.log" 2>&1 ||
    { cat "$SCRATCH/install.log" >&2; fail "cmake --install failed"; }
pc=$(find "$P" -name hdmlp.pc | head -1)
[ -n "$pc" ] || fail "no hdmlp.pc under $P"
export PKG_CONFIG_PATH=${pc%/hdmlp.pc}
libdir=$(pkg-config --variable=libdir hdmlp) || fail "pkg-config hdmlp fails"

cflags=$(pkg-config --cflags hdmlp)
for f in $cflags; do
    case $f in
    -I*) [ "$(cd "${f#-I}" && pwd -P)" = "$(cd "$P/include" && pwd -P)" ] ||
        fail "--cflags names $f, not the prefix's include directory" ;;
    *) fail "--cflags carries '$f' (only -I of the prefix expected): $cflags" ;;
    esac
done
step "pkg-config --cflags hdmlp: $cflags"

# A dataset made by the installed hdmlp-pack (its RUNPATH finds the prefix's libraries).
mkdir -p "$SCRATCH/files/a" "$SCRATCH/files/b"
for i in $(seq 1 120); do
    printf 'sample %d %0*d\n' "$i" $((i * 7)) 0 >"$SCRATCH/files/$([ $((i % 2)) = 0 ] && echo a || echo b)/$i"
done
"$P/bin/hdmlp-pack" -q --chunk-size 8 -o "$SCRATCH/ds" "$SCRATCH/files" ||
    fail "the installed hdmlp-pack failed"
out=$("$P/bin/hdmlp-pack" --verify "$SCRATCH/ds" 2>&1)
[ "$out" = OK ] || fail "hdmlp-pack --verify: $out"
"$P/bin/hdmlp-bench" "$SCRATCH/ds" --memory 1M --epochs 1 >"$SCRATCH/bench.out" 2>&1 ||
    { cat "$SCRATCH/bench.out" >&2; fail "the installed hdmlp-bench failed"; }
step "installed hdmlp-pack and hdmlp-bench: OK"

# build NAME FLAGS...: compiles iterate.c; runs it on the dataset; checks the count.
build() {
    local name=$1
    shift
    # shellcheck disable=SC2068  # the flags are pkg-config's words
    "$CC" "$SOURCE/examples/iterate.c" -o "$SCRATCH/$name" $@ 2>"$SCRATCH/$name.log" ||
        { cat "$SCRATCH/$name.log" >&2; fail "$name: does not link: $CC iterate.c $*"; }
    local got
    got=$("$SCRATCH/$name" "$SCRATCH/ds" 2>&1) || fail "$name: does not run: $got"
    case $got in
    "120 samples,"*) ;;
    *) fail "$name: printed '$got', expected 120 samples" ;;
    esac
    step "$name ($*): $got"
}
build dynamic "$(pkg-config --cflags --libs hdmlp)"
build rpath "$(pkg-config --cflags --libs hdmlp) -Wl,-rpath,$libdir"
build static-flags "$(pkg-config --static --cflags --libs hdmlp)"
build archive "$(pkg-config --cflags --libs hdmlp-static)"
if readelf -d "$SCRATCH/archive" | grep -q 'NEEDED.*libhdmlp'; then
    fail "hdmlp-static: the program still needs libhdmlp.so"
fi
readelf -d "$SCRATCH/dynamic" | grep -q 'NEEDED.*libhdmlp\.so\.0' ||
    fail "pkg-config hdmlp: the program does not use libhdmlp.so.0"

if [ -n "$PY" ]; then
    site=$(find "$P" -type d -name hdmlp -path '*-packages/hdmlp' | head -1)
    if [ -n "$site" ]; then
        got=$(PYTHONPATH=${site%/hdmlp} "$PY" -c '
import sys, hdmlp
from hdmlp.pack import tool_path
print(tool_path("hdmlp-pack"))
hdmlp.pack(sys.argv[1], sys.argv[2], chunk_size=8, quiet=True)
print(len(hdmlp.Dataset(sys.argv[2])))
' "$SCRATCH/files" "$SCRATCH/ds-py" 2>&1) || fail "the installed Python package: $got"
        [ "$got" = "$(cd "$P/bin" && pwd -P)/hdmlp-pack
120" ] || [ "$got" = "$P/bin/hdmlp-pack
120" ] || fail "the installed Python package printed: $got"
        step "installed Python package: hdmlp.pack runs $P/bin/hdmlp-pack"
    fi
    # pip against this prefix, by HDMLP_PREFIX and by pkg-config: the extension links the
    # prefix's libhdmlp and the console scripts run the prefix's tools.
    mkdir -p "$SCRATCH/src"
    cp -r "$SOURCE/python" "$SOURCE/include" "$SCRATCH/src/"
    # the size grammar the extension compiles in (python/setup.py, UNITS)
    mkdir -p "$SCRATCH/src/loader/config"
    cp "$SOURCE/loader/config/loader_units.c" "$SOURCE/loader/config/loader_units.h" \
        "$SCRATCH/src/loader/config/"
    rm -rf "$SCRATCH/src/python/build" "$SCRATCH/src/python/"*.egg-info
    for how in prefix pkg-config; do
        venv=$SCRATCH/venv-$how
        "$PY" -m venv --system-site-packages "$venv" || fail "venv"
        if [ $how = prefix ]; then
            HDMLP_PREFIX=$P "$venv/bin/pip" install -q --no-build-isolation \
                --no-index "$SCRATCH/src/python" >"$SCRATCH/pip.log" 2>&1
        else
            "$venv/bin/pip" install -q --no-build-isolation --no-index "$SCRATCH/src/python" \
                >"$SCRATCH/pip.log" 2>&1
        fi || { cat "$SCRATCH/pip.log" >&2; fail "pip install with libhdmlp from the $how"; }
        rm -rf "$SCRATCH/src/python/build"
        where=$(cd "$SCRATCH" && "$venv/bin/python" -m hdmlp where 2>&1) ||
            fail "$how: python -m hdmlp where: $where"
        for t in hdmlp-pack hdmlp-bench; do
            echo "$where" | grep -qx "$t: \($P\|$(cd "$P" && pwd -P)\)/bin/$t" ||
                fail "$how: the package does not run the prefix's $t: $where"
        done
        out=$(PATH=$venv/bin:/usr/bin:/bin hdmlp-pack --verify "$SCRATCH/ds" 2>&1)
        [ "$out" = OK ] || fail "$how: the venv's hdmlp-pack --verify: $out"
        step "pip with libhdmlp from the $how: the tools are the prefix's"
    done
fi
rm -rf "$SCRATCH"
echo "[pkg_config] PASS"
