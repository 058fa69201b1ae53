#!/bin/bash
# Same-host path: 3 hdmlp-bench processes with --peers on 127.0.0.1 reach each other over
# the Unix socket (peers_same_host = 2 in each rank's JSON, and no TCP connection between
# them), and with --same-host tcp over TCP (peers_same_host = 0); each way every epoch's
# deliveries together are the dataset exactly once. Under mpirun (when present) 2 ranks
# report 1 peer each. The bytes that cross the socket are checked in test_samehost.
source "$(dirname "$0")/dist_lib.sh"

N=2003
EPOCHS=2
make_synthetic "$T/syn" $N 16 5

for mode in socket tcp; do
    want=2
    [ $mode = tcp ] && want=0
    peers_run $mode 120 "$T/syn" --memory 25% --epochs $EPOCHS --seed 9 --batch 16 \
        --token 77 --same-host $mode --ids "$T/$mode.ids" --json
    peers_all_ok $mode "--same-host $mode"
    ok
    $CHECK union $N $EPOCHS 3 "$T/$mode.ids" || fail "--same-host $mode: exactly-once"
    ok
    for r in 0 1 2; do
        got=$($CHECK get "$T/$mode.$r.out" peers_same_host)
        [ "$got" = $want ] || fail "--same-host $mode: rank $r has peers_same_host $got, want $want"
        [ "$($CHECK get "$T/$mode.$r.out" config.same_host)" = $mode ] ||
            fail "--same-host $mode: rank $r's JSON does not echo same_host"
    done
    ok
    in=$($CHECK sum net_bytes_in "$T/$mode.0.out" "$T/$mode.1.out" "$T/$mode.2.out")
    [ "$in" -gt 0 ] || fail "--same-host $mode: no bytes from peers"
    ok
    note "--same-host $mode: peers_same_host $want per rank, $in bytes from peers"
done

# While a socket run is under way, its ranks hold Unix connections and no TCP ones.
if command -v ss >/dev/null 2>&1; then
    list=$(peer_list 3)
    ports=$(echo "$list" | tr ',' '\n' | sed 's/.*://' | paste -sd'|')
    pids=()
    for r in 0 1 2; do
        timeout -k 5 60 "$BENCH" "$T/syn" --peers "$list" --rank $r --memory 25% --epochs 40 \
            --seed 9 --batch 16 --compute-ms 2 --quiet >"$T/ss.$r.out" 2>"$T/ss.$r.err" &
        pids+=($!)
    done
    tcp=-1
    unix=-1
    for _ in $(seq 50); do
        sleep 0.1
        tcp=$(ss -Htn state established | grep -Ec "127\.0\.0\.1:($ports) ")
        unix=$(ss -Hx | grep -c '@hdmlp-')
        [ "$unix" -ge 6 ] && break
    done
    for p in "${pids[@]}"; do
        wait "$p" || { LAST_ERR=$T/ss.0.err; fail "socket run: a rank failed"; }
    done
    [ "$unix" -ge 6 ] || fail "socket run: $unix Unix connections to @hdmlp-*, want >= 6"
    [ "$tcp" = 0 ] || fail "socket run: $tcp TCP connections between the ranks' ports"
    note "socket run: $unix Unix socket ends, $tcp TCP connections"
    ok
fi

if [ -n "$MPIRUN" ] && [ -x "$MPIRUN" ]; then
    mpi_ok 2 120 "$T/mpi.out" "$T/mpi.err" "$T/syn" --memory 25% --epochs 1 --seed 9 \
        --batch 16 --json --quiet
    [ "$($CHECK get "$T/mpi.out" peers_same_host)" = 2 ] ||
        fail "mpirun -np 2: peers_same_host over both ranks is not 2"
    ok
fi
finish
