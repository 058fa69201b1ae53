#!/bin/bash
# What fields cost (issue 28): a classification dataset (Fashion-MNIST's 60,000 PNGs, from
# Debian's dataset-fashion-mnist) packed three ways, same seed, chunk size auto:
#   list      hdmlp-pack --list train.tsv           (a classification dataset, as before)
#   manifest  a JSONL manifest of image and label   (fields: packed as one value + label)
#   fielded   the same manifest plus an int64 field (samples delivered as field records)
# then read by hdmlp-bench (E epochs at 25 % of the raw bytes, warm), R rounds, each round
# starting with the next contender,
# every contender under the same limits. Prints samples/s by round, each one's ratio to
# `list` by round and the median ratio (`manifest` has the same files as `list`: its spread
# is the machine's), and the metadata beyond the values: DIR/index + DIR/tables + DIR/keys
# per sample, and the value records per field per sample.
#   tests/bench/fields_cost.sh BUILD [WORK] [EPOCHS] [ROUNDS]
set -e
B=${1:?usage: fields_cost.sh BUILD [WORK] [EPOCHS]}
W=${2:-${TMPDIR:-/var/tmp}/hdmlp-fields-cost}
E=${3:-10}
R=${4:-5}
HERE=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3
mkdir -p "$W"
if [ ! -f "$W/tree/train.tsv" ]; then
  rm -rf "$W/tree"
  $PY "$HERE/../data/make_fashion_mnist.py" "$W/tree" --limit-train 60000 --limit-test 1 >/dev/null
fi
$PY - "$W/tree" <<'EOF'
import json, sys
tree = sys.argv[1]
with open(f"{tree}/train.tsv") as f, open(f"{tree}/plain.jsonl", "w") as p, \
        open(f"{tree}/fielded.jsonl", "w") as q:
    for i, line in enumerate(f):
        path, label = line.rstrip("\n").split("\t")
        row = {"__key__": path, "image": path, "label": label}
        p.write(json.dumps(row) + "\n")
        q.write(json.dumps(dict(row, n=i)) + "\n")
EOF
P="$B/packer/hdmlp-pack --seed 1 --threads 2 --quiet --force"
$P -o "$W/list" --list "$W/tree/train.tsv"
$P -o "$W/manifest" --manifest "$W/tree/plain.jsonl"
$P -o "$W/fielded" --manifest "$W/tree/fielded.jsonl"
for v in list manifest fielded; do
  $B/loader/hdmlp-bench "$W/$v" --memory 25% --epochs 1 --quiet >/dev/null  # warm
done
order=(list manifest fielded)
for r in $(seq "$R"); do
  for i in 0 1 2; do # each round starts with the next contender
    v=${order[$(( (i + r) % 3 ))]}
    $B/loader/hdmlp-bench "$W/$v" --memory 25% --epochs "$E" --json --quiet > "$W/$v.$r.json"
  done
done
$PY - "$W" "$B" "$R" <<'EOF'
import json, os, statistics, subprocess, sys
w, b, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
names = ["list", "manifest", "fielded"]
rate = {v: [json.load(open(f"{w}/{v}.{r}.json"))["samples_per_s"] for r in range(1, rounds + 1)]
        for v in names}
for v in names:
    ratios = [x / y for x, y in zip(rate[v], rate["list"])]
    print(f"{v:9} samples/s {' / '.join(str(round(x)) for x in rate[v])}   of list: "
          f"{' / '.join(f'{x:.3f}' for x in ratios)}   median {statistics.median(ratios):.3f}")
for v in names:
    d = f"{w}/{v}"
    meta = sum(os.path.getsize(f"{d}/{f}") for f in ("index", "tables", "keys"))
    info = subprocess.run([f"{b}/packer/hdmlp-pack", "--info", d], capture_output=True,
                          text=True, check=True).stdout
    n = int(next(l.split()[1] for l in info.splitlines() if l.startswith("samples ")))
    fields = sum(1 for l in info.splitlines() if l.startswith("  ") and
                 any(t in l for t in (" image ", " bytes ", " int64 ")))
    tables = os.path.getsize(f"{d}/tables") - 16
    print(f"{v:9} metadata {meta / n:.1f} B/sample (index {os.path.getsize(d + '/index')}, "
          f"tables {tables}, keys {os.path.getsize(d + '/keys')}); value records "
          f"{tables / n / max(fields, 1):.1f} B per field per sample ({fields} fields)")
EOF
