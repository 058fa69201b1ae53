#!/bin/bash
# hdmlp-bench --mpi under mpirun -np 2/3/4 on synthetic data and on a packed Fashion-MNIST
# subset: in every epoch the ranks' deliveries together are the dataset exactly once, each
# rank gets its share (N not divisible by the world size on purpose), for several memory
# budgets; each rank's sequence is identical across two runs with the same seed, with
# prefetch on and off; the JSON total adds up the ranks.
source "$(dirname "$0")/dist_lib.sh"
need_mpirun

EPOCHS=3
N_SYN=3001
make_synthetic "$T/syn" $N_SYN 16 1
DATASETS="syn:$N_SYN"
N_FM=2999
if make_fmnist "$T/fm" $N_FM 32; then
    DATASETS="$DATASETS fm:$N_FM"
fi

for spec in $DATASETS; do
    name=${spec%%:*} n=${spec##*:}
    for cfg in 2:25% 3:10% 4:40% 3:100%; do
        np=${cfg%%:*} mem=${cfg##*:}
        tag=$name-np$np-m${mem%\%}
        mpi_ok "$np" 120 "$T/$tag.json" "$T/$tag.err" "$T/$name" --memory "$mem" \
            --epochs $EPOCHS --seed 5 --batch 16 --ids "$T/$tag.ids" --json
        $CHECK union "$n" $EPOCHS "$np" "$T/$tag.ids" || fail "$tag: exactly-once"
        ok
        # The JSON total is rank 0's report of every rank.
        [ "$($CHECK get "$T/$tag.json" samples)" = $((n * EPOCHS)) ] ||
            fail "$tag: total samples $($CHECK get "$T/$tag.json" samples) != $((n * EPOCHS))"
        [ "$($CHECK get "$T/$tag.json" world)" = "$np" ] || fail "$tag: JSON world != $np"
        [ "$($CHECK get "$T/$tag.json" ranks.$((np - 1)).rank)" = $((np - 1)) ] ||
            fail "$tag: JSON lacks rank $((np - 1))"
        ok
    done
done

# Determinism: same seed, same per-rank sequences, with prefetch on (default) and off.
for pf in 256 0; do
    for run in a b; do
        tag=det-pf$pf-$run
        mpi_ok 3 120 "$T/$tag.out" "$T/$tag.err" "$T/syn" --memory 25% --epochs $EPOCHS \
            --seed 9 --batch 16 --prefetch $pf --ids "$T/$tag.ids" --quiet
        $CHECK union $N_SYN $EPOCHS 3 "$T/$tag.ids" || fail "$tag: exactly-once"
        ok
    done
    $CHECK same "$T/det-pf$pf-a.ids" "$T/det-pf$pf-b.ids" 3 ||
        fail "prefetch $pf: two runs with seed 9 delivered different per-rank sequences"
    ok
done
if $CHECK same "$T/det-pf256-a.ids" "$T/det-pf0-a.ids" 3 >/dev/null 2>&1; then
    note "prefetch on and off deliver the same per-rank sequences"
else
    note "prefetch on and off deliver different per-rank sequences (each deterministic)"
fi
# Another seed, another order.
mpi_ok 3 120 "$T/seed10.out" "$T/seed10.err" "$T/syn" --memory 25% --epochs $EPOCHS \
    --seed 10 --batch 16 --ids "$T/seed10.ids" --quiet
if $CHECK same "$T/det-pf256-a.ids" "$T/seed10.ids" 3 >/dev/null 2>&1; then
    fail "seeds 9 and 10 delivered the same sequences"
fi
ok
finish
