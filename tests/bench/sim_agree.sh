#!/bin/bash
# Loads per chunk per epoch: the loader's forecast (its own scheduler, replayed on metadata;
# equal to a run, see test_forecast) against the independent simulation sim_brand.py, for
# both policies over chunk sizes and abstract-memory sizes, down to A = 2 groups.
#
#   tests/bench/sim_agree.sh [BUILD_DIR]      (default: build)
#
# Needs hdmlp-pack, hdmlp-bench and /usr/bin/python3 with numpy. Prints one line per case
# and the largest relative difference; exits 1 if any case differs by more than 5 %.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "${1:-$HERE/../../build}" && pwd)
PY=/usr/bin/python3
WORK=$(mktemp -d "${TMPDIR:-/tmp}/hdmlp-sim-agree.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
N=18000
EPOCHS=20
# Small files: the scheduler's decisions depend on N, K and A only (sizes enter through the
# byte cap, which uniform sizes do not reach).
"$PY" - "$WORK/src" "$N" <<'EOF'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    d = os.path.join(root, f"c{i % 10}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"{i:06d}.bin"), "wb") as f:
        f.write(i.to_bytes(8, "little") * 64)
EOF
worst=0
printf '%-5s %-5s %-9s %4s %9s %9s %7s\n' K mem policy A loader sim diff
for k in 16 64 256; do
    "$BUILD/packer/hdmlp-pack" "$WORK/src" -o "$WORK/ds$k" --chunk-size "$k" --seed 7 >/dev/null
    c=$(((N + k - 1) / k))
    for mem in 4% 10% 30%; do
        for pol in fill-rate random; do
            json=$("$BUILD/loader/hdmlp-bench" "$WORK/ds$k" --memory "$mem" --policy "$pol" \
                --epochs "$EPOCHS" --batch 8 --threads 1 --ram-cache 0 --plan --json --quiet \
                2>/dev/null | grep '^{') || continue # budget below one abstract chunk
            read -r a loads <<<"$(echo "$json" | "$PY" -c \
                'import json,sys; d=json.load(sys.stdin); print(d["abstract_chunks"], d["chunk_loads"])')"
            sim=$("$PY" "$HERE/sim_brand.py" --n "$N" --k "$k" --a "$a" --epochs 5 --runs 3 \
                --policy "$pol" --json | "$PY" -c \
                'import json,sys; print(json.load(sys.stdin)["mean_loads_per_chunk"])')
            line=$("$PY" -c "
l = $loads / $c / $EPOCHS; s = $sim; d = (l - s) / s * 100
print(f'{$k:<5} {\"$mem\":<5} {\"$pol\":<9} {$a:4} {l:9.3f} {s:9.3f} {d:+6.1f}%')")
            echo "$line"
            d=$(echo "$line" | awk '{v=$7; sub("%","",v); if (v<0) v=-v; print v}')
            worst=$("$PY" -c "print(max($worst, $d))")
        done
    done
done
echo "largest difference: $worst %"
"$PY" -c "import sys; sys.exit(0 if $worst <= 5 else 1)"
