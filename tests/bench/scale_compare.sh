#!/bin/bash
# Same-run throughput at N tiny samples (issue 27's "no worse than today at 1 M"): an older
# build (OLD: its hdmlp-pack with K = 64 and its bench_scale) against this one (NEW: K = 64
# and the packer's default, auto), bench_scale one epoch at a 32 MiB budget, 3 rounds
# alternating, all on the same archive.
#   tests/bench/scale_compare.sh OLD_BUILD NEW_BUILD [N] [WORK]
set -e
OLD=${1:?usage: scale_compare.sh OLD_BUILD NEW_BUILD [N] [WORK]}
NEW=${2:?usage: scale_compare.sh OLD_BUILD NEW_BUILD [N] [WORK]}
N=${3:-1000000}
W=${4:-${TMPDIR:-/var/tmp}/hdmlp-scale-compare}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$W"
python3 "$HERE/scale_gen.py" "$N" | zstd -1 -q -f -o $W/d.tar.zst
$OLD/packer/hdmlp-pack --chunk-size 64 --seed 1 --compress none --threads 2 --quiet --force -o $W/old64 $W/d.tar.zst
$NEW/packer/hdmlp-pack --chunk-size 64 --seed 1 --compress none --threads 2 --quiet --force -o $W/new64 $W/d.tar.zst
$NEW/packer/hdmlp-pack --seed 1 --compress none --threads 2 --quiet --force -o $W/newauto $W/d.tar.zst
for r in 1 2 3; do
  for v in old64 new64 newauto; do
    b=$NEW; [ $v = old64 ] && b=$OLD
    $b/tests/bench_scale $W/$v --memory 33554432 > $W/$v.$r.json 2>$W/$v.$r.err
    python3 -c "import json,sys; d=[json.loads(l) for l in open(sys.argv[1]) if l.startswith('{')][-1]; print(sys.argv[2], sys.argv[3], round(d['samples_per_s']), 'anon', d['peak_anon_kib']-d['rss']['start']['anon_kib'], 'file', d['peak_file_kib']-d['rss']['start']['file_kib'], 'loads', d['chunk_loads'])" $W/$v.$r.json $v $r
  done
done
