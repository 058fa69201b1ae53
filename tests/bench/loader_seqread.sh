#!/bin/sh
# Sequential-read contender of the loader benchmark: reads FILE... once, in order, with
# dd (4 MiB blocks, O_DIRECT: no page cache) and prints one JSON object.
#   loader_seqread.sh FILE...
[ $# -gt 0 ] || { echo "usage: loader_seqread.sh FILE..." >&2; exit 2; }
b=0
s=$(date +%s.%N)
for f in "$@"; do
    dd if="$f" of=/dev/null bs=4M iflag=direct status=none || exit 1
    b=$((b + $(stat -c %s "$f")))
done
e=$(date +%s.%N)
awk -v a="$s" -v z="$e" -v b="$b" \
    'BEGIN { printf "{\"bytes_read\": %.0f, \"seconds\": %.6f, \"mb_per_s\": %.3f}\n", b, z - a, b / 1e6 / (z - a) }'
