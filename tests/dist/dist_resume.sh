#!/bin/bash
# Exact resume through hdmlp-bench: a run stopped with --resume-after N --state FILE and
# continued with --state FILE delivers, in all, exactly the uninterrupted run's sequence —
# single rank (stops mid-epoch and at an epoch boundary), and 3 ranks under mpirun (each
# rank's own FILE.<rank>). A state given to another seed is refused with a clear message.
source "$(dirname "$0")/dist_lib.sh"

make_synthetic "$T/syn" 2500 16 5
COMMON=(--memory 25% --epochs 3 --seed 11 --batch 20 --quiet)

# tokens FILE...: the delivered indices of the --ids files, in order, one per line.
tokens() { cat "$@" | tr ' ' '\n' | sed '/^$/d'; }

# Single rank: stop after N batches, resume, compare with the uninterrupted order.
"$BENCH" "$T/syn" "${COMMON[@]}" --ids "$T/ref.ids" >/dev/null || fail "reference run"
ok
for n in 7 125 200; do # 125 batches = one epoch exactly
    rm -f "$T/state" "$T/a.ids" "$T/b.ids"
    "$BENCH" "$T/syn" "${COMMON[@]}" --resume-after $n --state "$T/state" --ids "$T/a.ids" \
        >/dev/null 2>"$T/a.err" || { LAST_ERR=$T/a.err; fail "stop after $n batches"; }
    [ -s "$T/state" ] || fail "no state written after $n batches"
    "$BENCH" "$T/syn" "${COMMON[@]}" --state "$T/state" --ids "$T/b.ids" >/dev/null \
        2>"$T/b.err" || { LAST_ERR=$T/b.err; fail "resume after $n batches"; }
    cmp -s <(tokens "$T/ref.ids") <(tokens "$T/a.ids" "$T/b.ids") ||
        fail "resumed after $n batches: the sequence differs from the uninterrupted run"
    ok
done

# Another seed: refused, naming the seed.
if "$BENCH" "$T/syn" --memory 25% --epochs 3 --seed 12 --batch 20 --quiet \
    --state "$T/state" >/dev/null 2>"$T/bad.err"; then
    fail "a state saved with seed 11 was accepted for seed 12"
fi
grep -q "seed" "$T/bad.err" || { LAST_ERR=$T/bad.err; fail "the refusal does not name the seed"; }
ok

# Three ranks under mpirun.
if [ -n "$MPIRUN" ] && [ -x "$MPIRUN" ]; then
    mpi_ok 3 120 "$T/m.out" "$T/m.err" "$T/syn" "${COMMON[@]}" --ids "$T/mref"
    rm -f "$T"/mstate.*
    mpi_ok 3 120 "$T/m1.out" "$T/m1.err" "$T/syn" "${COMMON[@]}" --resume-after 40 \
        --state "$T/mstate" --ids "$T/ma"
    mpi_ok 3 120 "$T/m2.out" "$T/m2.err" "$T/syn" "${COMMON[@]}" --state "$T/mstate" \
        --ids "$T/mb"
    for r in 0 1 2; do
        cmp -s <(tokens "$T/mref.$r") <(tokens "$T/ma.$r" "$T/mb.$r") ||
            fail "rank $r: the resumed sequence differs from the uninterrupted run"
        ok
    done
else
    note "mpirun not found: multi-rank part skipped"
fi
finish
