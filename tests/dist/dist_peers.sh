#!/bin/bash
# Peer-list bootstrap without MPI: 3 hdmlp-bench processes with --peers on 127.0.0.1 (free
# ports picked here) and a shared --token; every epoch's deliveries together are the
# dataset exactly once; each process prints its own rank's JSON ("rank" set) and the
# processes' counters add up. A process with the wrong token fails with HDMLP_E_PEER.
source "$(dirname "$0")/dist_lib.sh"

N=2003
EPOCHS=3
make_synthetic "$T/syn" $N 16 3

peers_run ok 120 "$T/syn" --memory 25% --epochs $EPOCHS --seed 4 --batch 16 --token 4242 \
    --ids "$T/ok.ids" --json
peers_all_ok ok
ok
$CHECK union $N $EPOCHS 3 "$T/ok.ids" || fail "exactly-once across the peer-list ranks"
ok
for r in 0 1 2; do
    [ "$($CHECK get "$T/ok.$r.out" rank)" = $r ] || fail "process $r's JSON has no \"rank\": $r"
    [ "$($CHECK get "$T/ok.$r.out" world)" = 3 ] || fail "process $r's JSON has no \"world\": 3"
done
ok
total=$($CHECK sum samples "$T/ok.0.out" "$T/ok.1.out" "$T/ok.2.out")
[ "$total" = $((N * EPOCHS)) ] || fail "samples add up to $total, expected $((N * EPOCHS))"
ok
rq=$($CHECK sum remote_requests "$T/ok.0.out" "$T/ok.1.out" "$T/ok.2.out")
note "3 peer-list ranks: $total samples, $rq remote requests"

# The same seed again: the same per-rank sequences (other ports, other token).
peers_run again 120 "$T/syn" --memory 25% --epochs $EPOCHS --seed 4 --batch 16 --token 7 \
    --ids "$T/again.ids" --quiet
peers_all_ok again
$CHECK same "$T/ok.ids" "$T/again.ids" 3 || fail "same seed, different per-rank sequences"
ok

# A rank with another job's token: nobody succeeds, every rank names HDMLP_E_PEER, the token
# is named, and all exit within a few peer timeouts.
peer_args() {
    if [ "$1" = 2 ]; then PEER_ARGS=(--token 98); else PEER_ARGS=(--token 99); fi
}
t0=$(date +%s%N)
peers_run tok 60 "$T/syn" --memory 25% --epochs 2 --seed 4 --batch 16 --peer-timeout 1000 \
    --quiet
ms=$((($(date +%s%N) - t0) / 1000000))
peers_all_failed tok "wrong token"
grep -qi 'token' "$T"/tok.*.err || fail "wrong token: no rank's message names the token"
[ $ms -lt 15000 ] || fail "wrong token: took $ms ms to fail"
note "wrong token: all 3 ranks failed with HDMLP_E_PEER in $ms ms"
ok

# Usage errors: --peers without --rank, rank out of range, with --mpi.
"$BENCH" "$T/syn" --memory 25% --peers 127.0.0.1:1,127.0.0.1:2 >/dev/null 2>&1
[ $? = 2 ] || fail "--peers without --rank: expected exit 2"
"$BENCH" "$T/syn" --memory 25% --peers 127.0.0.1:1,127.0.0.1:2 --rank 2 >/dev/null 2>&1
[ $? = 2 ] || fail "--rank 2 of 2 peers: expected exit 2"
"$BENCH" "$T/syn" --memory 25% --peers 127.0.0.1:1 --rank 0 --mpi >/dev/null 2>&1
[ $? = 2 ] || fail "--peers with --mpi: expected exit 2"
"$BENCH" "$T/syn" --memory 25% --peers nocolon,127.0.0.1:2 --rank 0 >/dev/null 2>&1
[ $? = 2 ] || fail "--peers with an entry without a port: expected exit 2"
ok
finish
