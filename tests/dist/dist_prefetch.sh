#!/bin/bash
# Opportunistic prefetch on a fixed configuration (3 ranks, synthetic data, memory 25 %,
# 2 epochs): the total number of miss requests sent to owners must drop at least 4x with
# prefetch on (the paper's Table 5: 8.54 -> 0.41 x 10^5, about 20x). Prints the ratio.
source "$(dirname "$0")/dist_lib.sh"
need_mpirun

make_synthetic "$T/syn" 3000 16 2
ARGS=("$T/syn" --memory 25% --epochs 2 --seed 3 --batch 16 --json)
mpi_ok 3 120 "$T/off.json" "$T/off.err" "${ARGS[@]}" --prefetch 0
mpi_ok 3 120 "$T/on.json" "$T/on.err" "${ARGS[@]}" --prefetch 256
off=$($CHECK get "$T/off.json" remote_requests)
on=$($CHECK get "$T/on.json" remote_requests)
hits=$($CHECK get "$T/on.json" remote_hits)
sent=$($CHECK get "$T/on.json" prefetch_sent)
[ "$($CHECK get "$T/off.json" prefetch_sent)" = 0 ] || fail "prefetch 0 still sent prefetches"
ok
[ "$off" -gt 0 ] || fail "no remote requests without prefetch: is the run distributed?"
ok
ratio=$(awk -v a="$off" -v b="$on" 'BEGIN { if (b == 0) print "inf"; else printf "%.1f", a / b }')
note "remote requests: prefetch off $off, on $on (ratio ${ratio}x); prefetches sent $sent, used in time $hits"
awk -v a="$off" -v b="$on" 'BEGIN { exit !(a >= 4 * b) }' ||
    fail "remote requests dropped only ${ratio}x with prefetch (off $off, on $on); expected >= 4x"
ok
finish
