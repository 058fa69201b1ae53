# shellcheck shell=bash
# Shared helpers for the hdmlp-pack CLI tests (sourced, not run).
#
# Every test script is called as
#     bash tests/cli/NAME.sh PACK [SCRATCH]
# PACK is the hdmlp-pack binary (or $HDMLP_PACK), SCRATCH a directory the test may fill
# (default: a fresh mktemp dir; also $HDMLP_TEST_TMP). Other environment:
#     HDMLP_DSDUMP   the tests/cli/dsdump helper (default: hdmlp_dsdump beside PACK's dir)
#     HDMLP_PYTHON   Python with PIL for the data generator (default /usr/bin/python3)
#     HDMLP_KEEP=1   keep the scratch directory even on success
# A script exits 0 when every check passed (checks that cannot run here print "SKIP: ..."),
# 1 with "FAIL: ..." on the first failed check, 77 when the whole script is skipped.

set -u
set -o pipefail

TEST_NAME=$(basename "${BASH_SOURCE[1]:-$0}" .sh)
CLI_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC_TESTS=$(cd "$CLI_DIR/.." && pwd)

PACK=${1:-${HDMLP_PACK:-}}
if [ -z "$PACK" ] || [ ! -x "$PACK" ]; then
    echo "usage: $0 PATH/TO/hdmlp-pack [SCRATCH]  (or set HDMLP_PACK)" >&2
    exit 2
fi
PACK=$(cd "$(dirname "$PACK")" && pwd)/$(basename "$PACK")
PYTHON=${HDMLP_PYTHON:-/usr/bin/python3}
[ -x "$PYTHON" ] || PYTHON=$(command -v python3)
DSDUMP=${HDMLP_DSDUMP:-}
if [ -z "$DSDUMP" ]; then
    for c in "$(dirname "$PACK")/hdmlp_dsdump" "$(dirname "$PACK")/../tests/hdmlp_dsdump"; do
        if [ -x "$c" ]; then DSDUMP=$c; break; fi
    done
fi

SCRATCH_BASE=${2:-${HDMLP_TEST_TMP:-}}
if [ -n "$SCRATCH_BASE" ]; then
    T=$SCRATCH_BASE/$TEST_NAME
    rm -rf "$T"
    mkdir -p "$T"
else
    T=$(mktemp -d "/tmp/hdmlp-$TEST_NAME.XXXXXX")
fi
T=$(cd "$T" && pwd)
LOG=$T/log
mkdir -p "$LOG"

CHECKS=0
note() { echo "[$TEST_NAME] $*"; }
skip() { echo "[$TEST_NAME] SKIP: $*"; }

fail() {
    echo "[$TEST_NAME] FAIL: $*" >&2
    if [ -s "$LOG/stderr" ]; then
        echo "---- stderr of the last hdmlp-pack run ($LAST_CMD):" >&2
        head -c 4000 "$LOG/stderr" >&2
    fi
    if [ -s "$LOG/stdout" ]; then
        echo "---- stdout of the last hdmlp-pack run:" >&2
        head -c 2000 "$LOG/stdout" >&2
    fi
    echo "(scratch kept in $T)" >&2
    exit 1
}
ok() { CHECKS=$((CHECKS + 1)); }

finish() {
    note "PASS ($CHECKS checks)"
    if [ "${HDMLP_KEEP:-0}" != 1 ]; then
        chmod -R u+rwX "$T" 2>/dev/null
        rm -rf "$T"
    fi
    exit 0
}

# pk ARGS...: runs hdmlp-pack with a time limit; sets RC, output in $LOG/stdout, $LOG/stderr.
LAST_CMD=
pk() {
    LAST_CMD="hdmlp-pack $*"
    timeout -k 5 "${PK_TIMEOUT:-60}" "$PACK" "$@" >"$LOG/stdout" 2>"$LOG/stderr"
    RC=$?
    if [ "$RC" = 124 ] || [ "$RC" = 137 ]; then
        fail "timed out (hung?): $LAST_CMD"
    fi
    return 0
}
# pk_ok ARGS...: hdmlp-pack must exit 0.
pk_ok() {
    pk "$@"
    [ "$RC" = 0 ] || fail "expected exit 0, got $RC: $LAST_CMD"
    ok
}
# expect_rc CODE WHAT
expect_rc() {
    [ "$RC" = "$1" ] || fail "$2: expected exit $1, got $RC ($LAST_CMD)"
    ok
}
expect_fail() {
    [ "$RC" != 0 ] || fail "$1: expected a non-zero exit, got 0 ($LAST_CMD)"
    ok
}
# expect_stderr ERE WHAT: stderr matches ERE (case-insensitive) and starts with "hdmlp-pack: ".
expect_stderr() {
    grep -qiE -- "$1" "$LOG/stderr" || fail "$2: stderr does not match /$1/"
    grep -q '^hdmlp-pack: ' "$LOG/stderr" || fail "$2: no stderr line starts with 'hdmlp-pack: '"
    ok
}
# expect_stderr_fixed STRING WHAT: stderr contains STRING (bytes, not a pattern).
expect_stderr_fixed() {
    grep -qF -- "$1" "$LOG/stderr" || fail "$2: stderr does not contain '$1'"
    ok
}
# nothing_left OUT WHAT: neither OUT nor .OUT.tmp-* beside it exists.
nothing_left() {
    local out=$1 d b
    d=$(dirname "$out")
    b=$(basename "$out")
    [ ! -e "$out" ] && [ ! -L "$out" ] || fail "$2: $out exists after a failed run"
    if compgen -G "$d/.$b.tmp-*" >/dev/null; then
        fail "$2: temp dir left behind: $(ls -d "$d/.$b.tmp-"*)"
    fi
    ok
}
no_temp_left() {
    local d b
    d=$(dirname "$1")
    b=$(basename "$1")
    if compgen -G "$d/.$b.tmp-*" >/dev/null; then
        fail "$2: temp dir left behind: $(ls -d "$d/.$b.tmp-"*)"
    fi
    ok
}

need_dsdump() {
    [ -n "$DSDUMP" ] && [ -x "$DSDUMP" ] || fail "dsdump helper not found (set HDMLP_DSDUMP)"
}
# dump DIR [dsdump options]: per-sample lines of DIR into stdout (no '#' lines).
dump() {
    local dir=$1
    shift
    "$DSDUMP" "$@" "$dir" | grep -v '^#' || true
}
# hdr DIR FIELD: a header value (samples, chunk_size, chunks, segments, labels, seed, ...).
hdr() {
    "$DSDUMP" --header "$1" | sed -n '1p' | tr ' ' '\n' | sed -n "s/^$2=//p"
}

# verify_ok DIR WHAT: hdmlp-pack --verify DIR exits 0 and says OK.
verify_ok() {
    pk --verify "$1"
    [ "$RC" = 0 ] || fail "$2: --verify $1 failed with exit $RC"
    grep -q 'OK' "$LOG/stdout" "$LOG/stderr" || fail "$2: --verify printed no 'OK'"
    ok
}

# tree_hash DIR: one digest over every file name, mode type and content below DIR.
tree_hash() {
    (cd "$1" && find . -printf '%y %p\n' | LC_ALL=C sort && \
        find . -type f -print0 | LC_ALL=C sort -z | xargs -0r sha256sum) | sha256sum | cut -c1-64
}

gen_fmnist() { # gen_fmnist OUT ARGS...
    local out=$1
    shift
    "$PYTHON" "$SRC_TESTS/data/make_fashion_mnist.py" "$out" "$@" 2>"$LOG/gen.err" ||
        { cat "$LOG/gen.err" >&2; fail "make_fashion_mnist.py failed"; }
}
