#!/usr/bin/env bash
# Crash-safe packing: SIGKILL hdmlp-pack at random moments and check what is left.
#
#   bash tests/crash/kill_pack.sh PATH/TO/hdmlp-pack [SCRATCH]
#   TRIALS=500 bash tests/crash/kill_pack.sh build/packer/hdmlp-pack     (long form)
#
# Environment: TRIALS (default 50), SEED (default 1; printed), FILES (samples in the
# generated tree, default 3000), HDMLP_KEEP=1 keeps the scratch directory.
#
# A tree of FILES samples (8 labels, mixed compressible/random, 0-24 KiB) is packed three
# times to measure the pack's duration D (the fastest). Each trial then packs it again (the
# input and options vary by trial: directory, tar or list input; one or several segment
# files; a fresh OUT or --force over an existing dataset) and sends SIGKILL after a random
# delay in [0, 1.2 D].
# Afterwards:
#   - OUT does not exist, or `hdmlp-pack --verify OUT` passes and OUT holds all FILES
#     samples (with --force: OUT is always the old or the new dataset, never missing);
#   - `.OUT.tmp-*` directories may remain (nothing can clean up after SIGKILL) and are
#     counted; re-running the same command with --force must succeed and verify;
#   - a normal failure afterwards (an input holding a fifo, and a SIGTERM at a random
#     moment) leaves no new temporary directory and no OUT.
# Prints the counts: trials, finished before the kill, killed before/after the rename,
# verify passes, temp dirs left by SIGKILL, re-runs ok, normal failures clean.
set -u
set -o pipefail

PACK=${1:-}
if [ -z "$PACK" ] || [ ! -x "$PACK" ]; then
    echo "usage: $0 PATH/TO/hdmlp-pack [SCRATCH]" >&2
    exit 2
fi
TRIALS=${TRIALS:-50}
SEED=${SEED:-1}
FILES=${FILES:-3000}
PYTHON=${HDMLP_PYTHON:-/usr/bin/python3}
[ -x "$PYTHON" ] || PYTHON=$(command -v python3)

if [ -n "${2:-}" ]; then
    T=$2/kill_pack
    rm -rf "$T"
    mkdir -p "$T"
else
    T=$(mktemp -d "${TMPDIR:-/tmp}/hdmlp-kill-pack.XXXXXX")
fi
T=$(cd "$T" && pwd)
RANDOM=$SEED

fail() {
    echo "kill_pack: FAIL: $*" >&2
    [ -s "$T/err" ] && { echo "---- last stderr:" >&2; head -c 3000 "$T/err" >&2; }
    echo "(scratch kept in $T)" >&2
    exit 1
}

# ---- the input: a tree, the same as a tar and as a list -------------------------------
"$PYTHON" - "$T/in" "$FILES" "$SEED" <<'EOF' || fail "generating the tree"
import os, random, sys
root, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
for i in range(n):
    d = os.path.join(root, "class%d" % (i % 8))
    os.makedirs(d, exist_ok=True)
    size = rng.randrange(0, 24576)
    if i % 3 == 0:
        data = rng.randbytes(size)
    else:
        word = b"sample %d of label %d; " % (i, i % 8)
        data = (word * (size // len(word) + 1))[:size]
    with open(os.path.join(d, "%05d.bin" % i), "wb") as f:
        f.write(data)
EOF
tar -cf "$T/in.tar" -C "$T/in" . || fail "tar"
(cd "$T" && find in -type f | awk -F/ '{print $0 "\t" $2}') >"$T/in.list"
mkdir -p "$T/bad/x"
cp "$T/in/class0/00000.bin" "$T/bad/x/"
mkfifo "$T/bad/x/fifo" || fail "mkfifo"

OUT=$T/out
info_samples() { "$PACK" --info "$1" 2>/dev/null | awk '$1 == "samples" {print $2}'; }
temp_dirs() { compgen -G "$T/.out.tmp-*" || true; }
now_ns() { date +%s%N; }

# ---- D: the fastest of three normal packs -------------------------------------------------
D_MS=
for i in 1 2 3; do
    rm -rf "$OUT"
    t0=$(now_ns)
    "$PACK" --quiet --threads 2 --seed 7 -o "$OUT" "$T/in" 2>"$T/err" ||
        fail "the reference pack failed"
    t1=$(now_ns)
    ms=$(((t1 - t0) / 1000000))
    if [ -z "$D_MS" ] || [ "$ms" -lt "$D_MS" ]; then D_MS=$ms; fi
done
[ "$D_MS" -ge 1 ] || D_MS=1
"$PACK" --verify "$OUT" >/dev/null 2>"$T/err" || fail "the reference pack does not verify"
[ "$(info_samples "$OUT")" = "$FILES" ] || fail "the reference pack lost samples"
echo "kill_pack: seed $SEED, $TRIALS trials, $FILES samples, one pack takes ${D_MS} ms"

finished=0 killed_before=0 killed_after=0 verified=0 temps=0 reruns=0 clean_failures=0
force_trials=0 force_old=0 force_new=0

for ((trial = 1; trial <= TRIALS; trial++)); do
    # options of this trial
    case $((trial % 3)) in
    0) input=("$T/in") ;;
    1) input=("$T/in.tar") ;;
    2) input=(--list "$T/in.list") ;;
    esac
    opts=(--quiet --threads 2 --seed "$trial")
    if ((trial % 2 == 0)); then
        opts+=(--segment-size 256K)
    fi
    force=0
    rm -rf "$OUT"
    if ((trial % 4 == 0)); then
        # --force over an existing (old) dataset with seed 7
        "$PACK" --quiet --seed 7 --compress none -o "$OUT" "$T/in" 2>"$T/err" ||
            fail "trial $trial: preparing the old dataset"
        opts+=(--force)
        force=1
        force_trials=$((force_trials + 1))
    fi

    delay_ms=$((RANDOM % (D_MS * 12 / 10 + 1)))
    "$PACK" "${opts[@]}" -o "$OUT" "${input[@]}" 2>"$T/err" &
    pid=$!
    sleep "$(printf '%d.%03d' $((delay_ms / 1000)) $((delay_ms % 1000)))"
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    rc=$?
    if [ "$rc" = 0 ]; then
        finished=$((finished + 1))
    elif [ "$rc" = 137 ]; then
        if [ -e "$OUT" ] && [ "$force" = 0 ]; then
            killed_after=$((killed_after + 1))
        elif [ ! -e "$OUT" ]; then
            killed_before=$((killed_before + 1))
        fi
    else
        fail "trial $trial: hdmlp-pack exited $rc before the kill (${opts[*]} ${input[*]})"
    fi

    # OUT absent, or a complete dataset
    if [ -e "$OUT" ]; then
        "$PACK" --verify "$OUT" >/dev/null 2>"$T/err" ||
            fail "trial $trial: OUT exists after the kill at ${delay_ms} ms but does not verify"
        [ "$(info_samples "$OUT")" = "$FILES" ] ||
            fail "trial $trial: OUT verifies but lacks samples"
        verified=$((verified + 1))
    fi
    if [ "$force" = 1 ]; then
        [ -e "$OUT" ] || fail "trial $trial: --force lost the old dataset (killed at ${delay_ms} ms)"
        seed=$("$PACK" --info "$OUT" | awk '$1 == "seed" {print $2}')
        if [ "$seed" = 7 ]; then
            force_old=$((force_old + 1))
            [ "$rc" = 137 ] || fail "trial $trial: --force finished but OUT is the old dataset"
        else
            [ "$seed" = "$trial" ] || fail "trial $trial: OUT has seed $seed"
            force_new=$((force_new + 1))
            [ "$rc" = 0 ] || killed_after=$((killed_after + 1))
        fi
        [ "$rc" = 0 ] || [ "$seed" != 7 ] || killed_before=$((killed_before + 1))
    fi
    left=$(temp_dirs | wc -l)
    temps=$((temps + left))
    if [ "$rc" = 0 ] && [ "$left" != 0 ]; then
        fail "trial $trial: a finished pack left a temporary directory"
    fi

    # the same command again must succeed (with --force, since OUT may now exist)
    "$PACK" "${opts[@]}" --force -o "$OUT" "${input[@]}" 2>"$T/err" ||
        fail "trial $trial: re-running after the kill failed"
    "$PACK" --verify "$OUT" >/dev/null 2>"$T/err" || fail "trial $trial: re-run does not verify"
    [ "$(info_samples "$OUT")" = "$FILES" ] || fail "trial $trial: re-run lacks samples"
    reruns=$((reruns + 1))
    rm -rf "$T"/.out.tmp-* # what a user would do with the leftovers of a SIGKILL

    # normal failures leave no temporary directory (and, for a fresh OUT, no OUT)
    rm -rf "$OUT"
    "$PACK" --quiet -o "$OUT" "$T/bad" 2>"$T/err" && fail "packing a fifo succeeded"
    [ ! -e "$OUT" ] && [ -z "$(temp_dirs)" ] || fail "trial $trial: a failed pack left files"
    if ((trial % 5 == 0)); then
        term_ms=$((RANDOM % (D_MS + 1)))
        "$PACK" "${opts[@]}" -o "$OUT" "${input[@]}" 2>"$T/err" &
        pid=$!
        sleep "$(printf '%d.%03d' $((term_ms / 1000)) $((term_ms % 1000)))"
        kill -TERM "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        rc=$?
        [ -z "$(temp_dirs)" ] || fail "trial $trial: SIGTERM at ${term_ms} ms left a temp dir"
        if [ "$rc" = 0 ]; then
            "$PACK" --verify "$OUT" >/dev/null 2>"$T/err" || fail "trial $trial: SIGTERM run"
        else
            [ ! -e "$OUT" ] || fail "trial $trial: SIGTERM at ${term_ms} ms (exit $rc) left OUT"
        fi
    fi
    clean_failures=$((clean_failures + 1))
done

printf 'kill_pack: %d trials: %d finished before the kill, %d killed before the rename, %d killed after it; %d OUT verified; %d temp dirs left by SIGKILL; %d re-runs ok; %d normal failures left nothing\n' \
    "$TRIALS" "$finished" "$killed_before" "$killed_after" "$verified" "$temps" "$reruns" \
    "$clean_failures"
printf 'kill_pack: --force trials: %d (old dataset kept %d, new in place %d)\n' \
    "$force_trials" "$force_old" "$force_new"
if [ "${HDMLP_KEEP:-0}" != 1 ]; then
    rm -rf "$T"
fi
echo "kill_pack: PASS"
