# shellcheck shell=bash
# Shared helpers for the distributed hdmlp-bench tests (sourced, not run).
#
# Every test script is called as
#     bash tests/dist/NAME.sh PATH/TO/hdmlp-bench PATH/TO/hdmlp-pack [SCRATCH]
# Environment: HDMLP_MPIRUN (default: mpirun on PATH), HDMLP_PYTHON (default
# /usr/bin/python3), HDMLP_KEEP=1 keeps the scratch directory. OpenMPI runs as root with the
# settings of TOOLCHAIN.md (set here). A script exits 0 when every check passed, 1 with
# "FAIL: ..." on the first failed one, 77 when it cannot run here (no mpirun, no data).

set -u
set -o pipefail

TEST_NAME=$(basename "${BASH_SOURCE[1]:-$0}" .sh)
DIST_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC_TESTS=$(cd "$DIST_DIR/.." && pwd)

BENCH=${1:-${HDMLP_BENCH:-}}
PACK=${2:-${HDMLP_PACK:-}}
if [ -z "$BENCH" ] || [ ! -x "$BENCH" ] || [ -z "$PACK" ] || [ ! -x "$PACK" ]; then
    echo "usage: $0 PATH/TO/hdmlp-bench PATH/TO/hdmlp-pack [SCRATCH]" >&2
    exit 2
fi
PYTHON=${HDMLP_PYTHON:-/usr/bin/python3}
[ -x "$PYTHON" ] || PYTHON=$(command -v python3)
CHECK="$PYTHON $DIST_DIR/dist_check.py"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
MPIRUN=${HDMLP_MPIRUN:-$(command -v mpirun || true)}

SCRATCH_BASE=${3:-${HDMLP_TEST_TMP:-}}
if [ -n "$SCRATCH_BASE" ]; then
    T=$SCRATCH_BASE/$TEST_NAME
    rm -rf "$T"
    mkdir -p "$T"
else
    T=$(mktemp -d "/tmp/hdmlp-$TEST_NAME.XXXXXX")
fi
T=$(cd "$T" && pwd)

CHECKS=0
note() { echo "[$TEST_NAME] $*"; }
fail() {
    echo "[$TEST_NAME] FAIL: $*" >&2
    if [ -n "${LAST_ERR:-}" ] && [ -s "$LAST_ERR" ]; then
        echo "---- stderr of the last run ($LAST_CMD):" >&2
        head -c 4000 "$LAST_ERR" >&2
    fi
    echo "(scratch kept in $T)" >&2
    exit 1
}
skip_all() {
    echo "[$TEST_NAME] SKIP: $*"
    exit 77
}
ok() { CHECKS=$((CHECKS + 1)); }
finish() {
    note "PASS ($CHECKS checks)"
    [ "${HDMLP_KEEP:-0}" = 1 ] || rm -rf "$T"
    exit 0
}

need_mpirun() {
    [ -n "$MPIRUN" ] && [ -x "$MPIRUN" ] || skip_all "mpirun not found"
}

# mpi NP SECONDS OUT ERR ARGS...: hdmlp-bench --mpi on NP ranks under a time limit; RC set.
LAST_CMD=
LAST_ERR=
mpi() {
    local np=$1 secs=$2 out=$3 err=$4
    shift 4
    LAST_CMD="mpirun -np $np hdmlp-bench --mpi $*"
    LAST_ERR=$err
    timeout -k 5 "$secs" "$MPIRUN" -np "$np" --oversubscribe "$BENCH" --mpi "$@" >"$out" 2>"$err"
    RC=$?
    if [ "$RC" = 124 ] || [ "$RC" = 137 ]; then
        fail "timed out after ${secs}s (hung?): $LAST_CMD"
    fi
}
mpi_ok() {
    mpi "$@"
    [ "$RC" = 0 ] || fail "exit $RC: $LAST_CMD"
    ok
}

# make_synthetic DIR COUNT K SEED: COUNT files of 200..4000 random bytes in 10 class
# directories (deterministic), packed uncompressed with chunk size K into DIR.
make_synthetic() {
    local dir=$1 count=$2 k=$3 seed=$4
    "$PYTHON" - "$dir.src" "$count" "$seed" <<'EOF' || fail "cannot generate $dir.src"
import os, random, sys
out, count, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
for i in range(count):
    d = os.path.join(out, f"c{i % 10}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"{i:06d}.bin"), "wb") as f:
        f.write(rng.randbytes(rng.randint(200, 4000)))
EOF
    "$PACK" --quiet --chunk-size "$k" --seed 11 --compress none -o "$dir" "$dir.src" \
        >"$T/pack.log" 2>&1 || fail "hdmlp-pack failed: $(tail -3 "$T/pack.log")"
    rm -rf "$dir.src"
}

# make_fmnist DIR COUNT K: the first COUNT Fashion-MNIST training images (PNG), packed with
# chunk size K. Returns 1 (with a note) when the data or PIL is missing.
make_fmnist() {
    local dir=$1 count=$2 k=$3
    if ! "$PYTHON" "$SRC_TESTS/data/make_fashion_mnist.py" "$dir.src" --limit-train "$count" \
        --limit-test 0 >"$T/fmnist.log" 2>&1; then
        note "Fashion-MNIST not available here: $(tail -1 "$T/fmnist.log")"
        return 1
    fi
    "$PACK" --quiet --chunk-size "$k" --seed 12 -o "$dir" "$dir.src/train" \
        >"$T/pack.log" 2>&1 || fail "hdmlp-pack failed: $(tail -3 "$T/pack.log")"
    rm -rf "$dir.src"
}

# free_ports N: N distinct free TCP ports on 127.0.0.1, space-separated (bound and
# released; another process could take one before hdmlp-bench binds it; below the
# ephemeral range: tests/support/free_ports.py).
free_ports() { "$PYTHON" "$DIST_DIR/../support/free_ports.py" "$1"; }

# peer_list N: a --peers list of N free ports on 127.0.0.1 ("127.0.0.1:P1,127.0.0.1:P2,...").
peer_list() {
    free_ports "$1" |
        awk '{ for (i = 1; i <= NF; i++) printf "%s127.0.0.1:%s", (i > 1 ? "," : ""), $i }'
}

# peers_run TAG SECONDS DATASET ARGS...: hdmlp-bench DATASET in 3 processes, rank r with
# --peers (a fresh peer_list 3) --rank r ARGS, each under a time limit of SECONDS; rank r
# writes $T/TAG.r.out and $T/TAG.r.err. Where the script defines a function peer_args,
# `peer_args R` may set the array PEER_ARGS to options for rank R alone (given before ARGS).
# Sets RCS ("rc0 rc1 rc2"), LAST_CMD and LAST_ERR (rank 0's).
peers_run() {
    local tag=$1 secs=$2 data=$3 list r pids=()
    shift 3
    list=$(peer_list 3)
    for r in 0 1 2; do
        PEER_ARGS=()
        if declare -F peer_args >/dev/null; then
            peer_args $r
        fi
        timeout -k 5 "$secs" "$BENCH" "$data" --peers "$list" --rank $r "${PEER_ARGS[@]}" "$@" \
            >"$T/$tag.$r.out" 2>"$T/$tag.$r.err" &
        pids+=($!)
    done
    RCS=""
    for r in 0 1 2; do
        wait "${pids[$r]}"
        RCS="$RCS $?"
    done
    RCS=${RCS# }
    LAST_CMD="hdmlp-bench --peers $list --rank R $*"
    LAST_ERR=$T/$tag.0.err
}

# peers_all_ok TAG [WHAT]: every process of the last peers_run TAG exited 0 (else fail,
# with rank 1's stderr and WHAT before the message).
peers_all_ok() {
    local tag=$1 what=${2:-}
    [ "$RCS" = "0 0 0" ] || { LAST_ERR=$T/$tag.1.err; fail "${what:+$what: }exit statuses $RCS"; }
}

# peers_all_failed TAG WHAT: every process of the last peers_run TAG exited 1 and its stderr
# names HDMLP_E_PEER; the failure messages start with WHAT.
peers_all_failed() {
    local tag=$1 what=$2 r rc
    for r in 0 1 2; do
        LAST_ERR=$T/$tag.$r.err
        rc=$(echo "$RCS" | cut -d' ' -f$((r + 1)))
        [ "$rc" = 1 ] || fail "$what: rank $r exited $rc, expected 1"
        grep -q 'HDMLP_E_PEER' "$T/$tag.$r.err" || fail "$what: rank $r does not name HDMLP_E_PEER"
    done
}
