#!/bin/bash
# Peer-list bootstrap without MPI: 3 hdmlp-bench processes with --peers on 127.0.0.1 (free
# ports picked here) and a shared --token; every epoch's deliveries together are the
# dataset exactly once; each process prints its own rank's JSON ("rank" set) and the
# processes' counters add up. A process with the wrong token fails with HDMLP_E_PEER.
source "$(dirname "$0")/dist_lib.sh"

N=2003
EPOCHS=3
make_synthetic "$T/syn" $N 16 3

# peers_run TAG SECONDS ARGS...: 3 processes; sets RCS ("rc0 rc1 rc2").
peers_run() {
    local tag=$1 secs=$2 ports list r pids=()
    shift 2
    ports=$(free_ports 3)
    list=$(echo "$ports" | awk '{ printf "127.0.0.1:%s,127.0.0.1:%s,127.0.0.1:%s", $1, $2, $3 }')
    for r in 0 1 2; do
        timeout -k 5 "$secs" "$BENCH" "$T/syn" --peers "$list" --rank $r "$@" \
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

peers_run ok 120 --memory 25% --epochs $EPOCHS --seed 4 --batch 16 --token 4242 \
    --ids "$T/ok.ids" --json
[ "$RCS" = "0 0 0" ] || { LAST_ERR=$T/ok.1.err; fail "exit statuses $RCS"; }
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
peers_run again 120 --memory 25% --epochs $EPOCHS --seed 4 --batch 16 --token 7 \
    --ids "$T/again.ids" --quiet
[ "$RCS" = "0 0 0" ] || { LAST_ERR=$T/again.1.err; fail "exit statuses $RCS"; }
$CHECK same "$T/ok.ids" "$T/again.ids" 3 || fail "same seed, different per-rank sequences"
ok

# A rank with another job's token: nobody succeeds, every rank names HDMLP_E_PEER, the token
# is named, and all exit within a few peer timeouts.
ports=$(free_ports 3)
list=$(echo "$ports" | awk '{ printf "127.0.0.1:%s,127.0.0.1:%s,127.0.0.1:%s", $1, $2, $3 }')
t0=$(date +%s%N)
pids=()
for r in 0 1 2; do
    tok=99
    [ $r = 2 ] && tok=98
    timeout -k 5 60 "$BENCH" "$T/syn" --peers "$list" --rank $r --token $tok --memory 25% \
        --epochs 2 --seed 4 --batch 16 --peer-timeout 1000 --quiet \
        >"$T/tok.$r.out" 2>"$T/tok.$r.err" &
    pids+=($!)
done
for r in 0 1 2; do
    wait "${pids[$r]}"
    rc=$?
    LAST_ERR=$T/tok.$r.err
    [ $rc = 1 ] || fail "wrong token: rank $r exited $rc, expected 1"
    grep -q 'HDMLP_E_PEER' "$T/tok.$r.err" || fail "wrong token: rank $r does not name HDMLP_E_PEER"
done
ms=$((($(date +%s%N) - t0) / 1000000))
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
