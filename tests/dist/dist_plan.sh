#!/bin/bash
# hdmlp-bench --plan against real runs, and the randomness figures' sanity.
#  - --plan --json predicts a run field by field under the same keys, the cost model fixed
#    (--no-cost-learning: with learning, bytes follow the live estimate) (single rank with
#    prefetch/async I/O on, RAM cache, start epoch, relaxed; and every rank of an
#    mpirun -np 3 job with prefetch on and off); --plan --rank R --world W alone gives
#    rank R's forecast without peers.
#  - With the whole dataset in memory the loader delivers a true permutation: the
#    same-chunk distance is ~1.0 and the epoch-to-epoch position correlation ~0.0; relaxed
#    mode clusters a chunk's samples (distance well below 1).
source "$(dirname "$0")/dist_lib.sh"

make_synthetic "$T/syn" 2500 16 5
KEYS="samples batches epochs requests hits misses chunk_loads read_ops bytes_read
      bytes_delivered samples_filled whole_refills ranged_refills fill_hist abstract_chunks
      source_bytes epoch_source_bytes"
# shellcheck disable=SC2086
compare() { $CHECK plan-vs-run "$1" "$2" $KEYS || fail "$3: the plan differs from the run"; ok; }

run_pair() { # TAG ARGS...
    local tag=$1
    shift
    LAST_CMD="hdmlp-bench $*"
    LAST_ERR=$T/$tag.err
    timeout -k 5 60 "$BENCH" "$T/syn" "$@" --no-cost-learning --json >"$T/$tag.run.json" 2>"$LAST_ERR" ||
        fail "$tag: run failed"
    timeout -k 5 60 "$BENCH" "$T/syn" "$@" --no-cost-learning --json --plan >"$T/$tag.plan.json" 2>"$LAST_ERR" ||
        fail "$tag: plan failed"
    [ "$($CHECK get "$T/$tag.plan.json" plan)" = True ] || fail "$tag: plan JSON lacks \"plan\": true"
    compare "$T/$tag.plan.json" "$T/$tag.run.json" "$tag"
}

run_pair single --memory 25% --epochs 3 --seed 2 --threads 2
run_pair ram --memory 25% --epochs 3 --seed 2 --ram-cache 100K
run_pair start --memory 25% --epochs 4 --start-epoch 2 --seed 2
run_pair relaxed --memory 25% --epochs 3 --seed 2 --relaxed
run_pair fits --memory 400% --epochs 3 --seed 2

if [ -n "$MPIRUN" ] && [ -x "$MPIRUN" ]; then
    for pf in 256 0; do
        mpi_ok 3 120 "$T/m$pf.run.json" "$T/m$pf.err" "$T/syn" --memory 25% --epochs 3 --seed 2 \
            --prefetch $pf --no-cost-learning --json
        mpi_ok 3 120 "$T/m$pf.plan.json" "$T/m$pf.err" "$T/syn" --memory 25% --epochs 3 --seed 2 \
            --prefetch $pf --no-cost-learning --json --plan
        compare "$T/m$pf.plan.json" "$T/m$pf.run.json" "mpirun -np 3 prefetch $pf"
    done
    # One rank's forecast alone equals that rank's part of the job's.
    "$BENCH" "$T/syn" --memory 25% --epochs 3 --seed 2 --plan --rank 1 --world 3 --json \
        >"$T/r1.plan.json" 2>"$T/r1.err" || fail "--plan --rank 1 --world 3 failed"
    "$PYTHON" - "$T/r1.plan.json" "$T/m256.plan.json" $KEYS <<'PY' || fail "--rank 1 --world 3 plan != rank 1 of the job"
import json, sys
a = json.load(open(sys.argv[1]))
b = json.load(open(sys.argv[2]))["ranks"][1]
bad = [k for k in sys.argv[3:] if a[k] != b[k]]
sys.exit(1 if bad else 0)
PY
    ok
else
    note "SKIP (mpirun not found): multi-rank plans"
fi

# Randomness figures.
read -r dist corr < <($CHECK random "$T/fits.run.json")
note "true permutation (400 % memory): same_chunk_distance $dist, epoch_position_correlation $corr"
awk -v d="$dist" -v c="$corr" 'BEGIN { exit !(d > 0.9 && d < 1.1 && c > -0.1 && c < 0.1) }' ||
    fail "a true permutation should give distance ~1 and correlation ~0, got $dist / $corr"
ok
read -r dist corr < <($CHECK random "$T/single.run.json")
note "strict, 25 % memory, K=16: same_chunk_distance $dist, epoch_position_correlation $corr"
read -r rdist rcorr < <($CHECK random "$T/relaxed.run.json")
note "relaxed, 25 % memory, K=16: same_chunk_distance $rdist, epoch_position_correlation $rcorr"
awk -v d="$rdist" -v s="$dist" 'BEGIN { exit !(d < s) }' ||
    fail "relaxed mode should cluster a chunk's samples more than strict ($rdist vs $dist)"
ok
# --no-randomness: null figures.
"$BENCH" "$T/syn" --memory 25% --no-randomness --json >"$T/nr.json" 2>/dev/null || fail "--no-randomness run failed"
[ "$($CHECK get "$T/nr.json" same_chunk_distance)" = None ] || fail "--no-randomness still reports a figure"
ok

# Usage errors exit 2.
for bad in "--plan --ids $T/x" "--world 3" "--rank 1" "--ssd-cache $T" "--ssd-capacity 1M" \
    "--start-epoch 3 --epochs 3" "--ram-cache lots" "--bind-host 127.0.0.1" "--token 3" \
    "--prefetch -1" "--peer-timeout x"; do
    # shellcheck disable=SC2086
    "$BENCH" "$T/syn" --memory 25% $bad >/dev/null 2>"$T/usage.err"
    rc=$?
    [ $rc = 2 ] || fail "'$bad': expected exit 2, got $rc"
    grep -q "^hdmlp-bench: " "$T/usage.err" || fail "'$bad': no message"
done
ok
finish
