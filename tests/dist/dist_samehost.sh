#!/bin/bash
# Same-host paths: 3 hdmlp-bench processes with --peers on 127.0.0.1 reach each other
# through shared-memory rings by default and with --same-host shm (peers_same_host = 2 in
# each rank's JSON; while a run is under way they hold ring sockets and ring memfds, and
# neither TCP nor gRPC-socket connections between them), over the gRPC Unix socket with
# --same-host socket (peers_same_host = 2, Unix connections to @hdmlp-*, no TCP), and with
# --same-host tcp over TCP (peers_same_host = 0); each way every epoch's deliveries
# together are the dataset exactly once. Under mpirun (when present) 2 ranks report 1 peer
# each. The bytes that cross each path are checked in test_samehost.
source "$(dirname "$0")/dist_lib.sh"

N=2003
EPOCHS=2
make_synthetic "$T/syn" $N 16 5

for mode in shm socket tcp; do
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

# While a run is under way: with the socket its ranks hold Unix connections to the gRPC
# sockets and no TCP ones; with rings (the default) connections to the ring sockets, one
# ring memfd per peer mapped in each rank, and no connection to the gRPC sockets or TCP.
if command -v ss >/dev/null 2>&1; then
    for mode in socket default; do
        list=$(peer_list 3)
        ports=$(echo "$list" | tr ',' '\n' | sed 's/.*://' | paste -sd'|')
        extra=()
        [ $mode = socket ] && extra=(--same-host socket)
        pids=()
        for r in 0 1 2; do
            timeout -k 5 60 "$BENCH" "$T/syn" --peers "$list" --rank $r --memory 25% \
                --epochs 40 --seed 9 --batch 16 --compute-ms 2 --quiet "${extra[@]}" \
                >"$T/ss.$r.out" 2>"$T/ss.$r.err" &
            pids+=($!)
        done
        tcp=-1 grpc=-1 ring=-1 memfd=-1
        for _ in $(seq 50); do
            sleep 0.1
            tcp=$(ss -Htn state established | grep -Ec "127\.0\.0\.1:($ports) ")
            memfd=0
            kids=()
            for p in "${pids[@]}"; do
                for c in $(cat "/proc/$p/task/$p/children" 2>/dev/null); do # under timeout
                    kids+=("$c")
                    memfd=$((memfd + $(grep -c 'memfd:hdmlp-ring' "/proc/$c/maps" 2>/dev/null)))
                done
            done
            # Unix sockets of these ranks only (other test runs may share the namespace)
            ours=$(ss -Hxp | grep -E "pid=($(IFS='|'; echo "${kids[*]:-none}"))," || true)
            grpc=$(echo "$ours" | grep '@hdmlp-' | grep -vc -- '-ring')
            ring=$(echo "$ours" | grep -c '@hdmlp-[0-9a-f]*-ring')
            if [ $mode = socket ]; then
                [ "$grpc" -ge 6 ] && break
            else
                # each rank maps its 2 receiving rings and its 2 sending ones, twice each
                [ "$ring" -ge 6 ] && [ "$memfd" -ge 24 ] && break
            fi
        done
        for p in "${pids[@]}"; do
            wait "$p" || { LAST_ERR=$T/ss.0.err; fail "$mode run: a rank failed"; }
        done
        [ "$tcp" = 0 ] || fail "$mode run: $tcp TCP connections between the ranks' ports"
        if [ $mode = socket ]; then
            [ "$grpc" -ge 6 ] || fail "socket run: $grpc Unix connections to @hdmlp-*, want >= 6"
        else
            [ "$ring" -ge 6 ] || fail "ring run: $ring connections to @hdmlp-*-ring, want >= 6"
            [ "$memfd" -ge 24 ] || fail "ring run: $memfd ring mappings, want 24"
            [ "$grpc" = 0 ] || fail "ring run: $grpc connections to the gRPC sockets, want 0"
        fi
        note "$mode run: $grpc gRPC socket ends, $ring ring socket ends, $memfd ring mappings, $tcp TCP connections"
        ok
    done
fi

if [ -n "$MPIRUN" ] && [ -x "$MPIRUN" ]; then
    mpi_ok 2 120 "$T/mpi.out" "$T/mpi.err" "$T/syn" --memory 25% --epochs 1 --seed 9 \
        --batch 16 --json --quiet
    [ "$($CHECK get "$T/mpi.out" peers_same_host)" = 2 ] ||
        fail "mpirun -np 2: peers_same_host over both ranks is not 2"
    ok
fi
finish
