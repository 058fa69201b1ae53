#!/bin/bash
# hdmlp-bench with mutual TLS between the ranks (--tls-ca/--tls-cert/--tls-key, with the
# committed test certificates of tests/data/tls): 3 peer-list processes deliver the dataset
# exactly once per epoch and the same per-rank sequences as without TLS; a plaintext
# process among TLS ones makes every process fail with HDMLP_E_PEER within a few peer
# timeouts; the MPI bootstrap works with TLS (skipped without mpirun); the three options go
# together.
source "$(dirname "$0")/dist_lib.sh"

CERTS=$SRC_TESTS/data/tls
TLS=(--tls-ca "$CERTS/ca.pem" --tls-cert "$CERTS/rank.pem" --tls-key "$CERTS/rank.key")
N=2003
EPOCHS=2
make_synthetic "$T/syn" $N 16 3

# The ranks named in TLS_RANKS (e.g. "012") get the TLS options (peer_args, for peers_run).
TLS_RANKS=
peer_args() {
    case $TLS_RANKS in *$1*) PEER_ARGS=("${TLS[@]}") ;; esac
}

# tls_run TAG SECONDS TLS_RANKS ARGS...: peers_run on $T/syn with TLS on TLS_RANKS.
tls_run() {
    local tag=$1 secs=$2
    TLS_RANKS=$3
    shift 3
    peers_run "$tag" "$secs" "$T/syn" "$@"
    LAST_CMD="$LAST_CMD (TLS on ranks $TLS_RANKS)"
}

tls_run tls 120 012 --memory 25% --epochs $EPOCHS --seed 4 --batch 16 --token 4242 \
    --ids "$T/tls.ids" --json
peers_all_ok tls TLS
$CHECK union $N $EPOCHS 3 "$T/tls.ids" || fail "TLS: exactly-once across the ranks"
[ "$($CHECK get "$T/tls.0.out" config.tls)" = True ] || fail "TLS: the JSON does not say \"tls\": true"
ok
rq=$($CHECK sum remote_requests "$T/tls.0.out" "$T/tls.1.out" "$T/tls.2.out")
note "3 TLS peer-list ranks: exactly once, $rq remote requests"

tls_run plain 120 "" --memory 25% --epochs $EPOCHS --seed 4 --batch 16 --token 4242 \
    --ids "$T/plain.ids" --quiet
peers_all_ok plain plaintext
$CHECK same "$T/tls.ids" "$T/plain.ids" 3 || fail "TLS and plaintext: different sequences"
ok

# Rank 2 without TLS: nobody succeeds, every rank names HDMLP_E_PEER, within a few timeouts.
t0=$(date +%s%N)
tls_run mixed 60 01 --memory 25% --epochs $EPOCHS --seed 4 --batch 16 --peer-timeout 1000 \
    --quiet
ms=$((($(date +%s%N) - t0) / 1000000))
peers_all_failed mixed mixed
[ $ms -lt 15000 ] || fail "mixed: took $ms ms to fail"
note "TLS ranks 0, 1 and plaintext rank 2: all failed with HDMLP_E_PEER in $ms ms"
ok

# A missing key file: exit 1 naming the file.
list=$(peer_list 2)
LAST_ERR=$T/nokey.err
"$BENCH" "$T/syn" --memory 25% --peers "$list" --rank 0 --tls-ca "$CERTS/ca.pem" \
    --tls-cert "$CERTS/rank.pem" --tls-key "$T/missing.key" >/dev/null 2>"$T/nokey.err"
[ $? = 1 ] || fail "missing key: expected exit 1"
grep -q 'missing.key' "$T/nokey.err" || fail "missing key: the file is not named"
ok

# Usage errors: the options go together, and need peers.
"$BENCH" "$T/syn" --memory 25% --peers "$list" --rank 0 --tls-ca "$CERTS/ca.pem" \
    --tls-cert "$CERTS/rank.pem" >/dev/null 2>&1
[ $? = 2 ] || fail "--tls-ca and --tls-cert without --tls-key: expected exit 2"
"$BENCH" "$T/syn" --memory 25% "${TLS[@]}" >/dev/null 2>&1
[ $? = 2 ] || fail "--tls-* without --peers or --mpi: expected exit 2"
ok

# The MPI bootstrap (endpoints on 127.0.0.1, which the certificate names) with TLS.
if [ -n "$MPIRUN" ] && [ -x "$MPIRUN" ]; then
    mpi_ok 2 120 "$T/mpi.out" "$T/mpi.err" "$T/syn" --memory 25% --epochs $EPOCHS --seed 4 \
        --batch 16 --ids "$T/mpi.ids" --quiet "${TLS[@]}"
    $CHECK union $N $EPOCHS 2 "$T/mpi.ids" || fail "MPI with TLS: exactly-once across 2 ranks"
    ok
    note "mpirun -np 2 with TLS: exactly once"
else
    note "mpirun not found: the MPI part is left out"
fi
finish
