#!/bin/bash
# Ranks reading from object storage: hdmlp-bench --mpi under mpirun -np 2 with the dataset
# at s3://bucket/ds on tests/objstore/objstore_server.py (SigV4 checked on every request):
# each rank reads its own chunk groups from the store, the ranks' deliveries are the dataset
# exactly once per epoch, and every rank's sequence equals the one it gets from the local
# copy with the same seed.
source "$(dirname "$0")/dist_lib.sh"
need_mpirun

N=1501
make_synthetic "$T/root/bucket/ds" $N 16 1
"$PYTHON" "$SRC_TESTS/objstore/objstore_server.py" --root "$T/root" --s3 \
    --access-key distkey --secret-key dist/secret >"$T/server.out" 2>"$T/server.err" &
SERVER=$!
trap 'kill $SERVER 2>/dev/null' EXIT
for _ in $(seq 100); do
    grep -q '^PORT ' "$T/server.out" 2>/dev/null && break
    sleep 0.1
done
PORT=$(awk '/^PORT /{print $2}' "$T/server.out")
[ -n "$PORT" ] || skip_all "objstore_server.py did not start: $(head -3 "$T/server.err")"
export AWS_ACCESS_KEY_ID=distkey AWS_SECRET_ACCESS_KEY=dist/secret
export AWS_ENDPOINT_URL=http://127.0.0.1:$PORT AWS_REGION=us-east-1

for src in s3://bucket/ds "$T/root/bucket/ds"; do
    tag=$([ "${src#s3://}" != "$src" ] && echo remote || echo local)
    mpi_ok 2 120 "$T/$tag.json" "$T/$tag.err" "$src" --memory 25% --epochs 2 --seed 5 \
        --batch 16 --threads 4 --ids "$T/$tag.ids" --json
    $CHECK union $N 2 2 "$T/$tag.ids" || fail "$tag: exactly-once"
    ok
done
for r in 0 1; do
    cmp -s "$T/remote.ids.$r" "$T/local.ids.$r" || fail "rank $r: remote order differs"
    ok
done
finish
