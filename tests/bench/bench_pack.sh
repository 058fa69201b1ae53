#!/bin/bash
# Pack throughput benchmark: hdmlp-pack side by side with `tar -cf` of the same tree.
#
#   bench_pack.sh [--small] [--pack PATH] [--open-bench PATH] [--work DIR] [--out FILE]
#                 [--no-index-open] [--no-drop] [--keep-data]
#
# Data sets (deterministic, generated once under WORK and reused by later runs):
#   a  100,000 files of ~16 KiB (12-20 KiB), 100 class dirs          (--small: 2,000)
#   b   20,000 files, ImageNet-like lognormal sizes, mean ~110 KiB     (--small: 500)
#      bytes: 4 KiB blocks, half random, half low-entropy -> partly compressible
#   c  1,000,000 tiny files (16-64 B) for the index-open benchmark    (--small: 5,000)
# Runs per set a/b, each after `sync; echo 3 > /proc/sys/vm/drop_caches` (skipped with a
# warning when not permitted, or with --no-drop; the programs are then loaded again, untimed):
#   tar -cf OUT.tar -C SET .  followed by sync of OUT.tar   (I/O-bound reference; the
#                                                            packer fsyncs its output too)
#   hdmlp-pack --compress none|zstd:1 --threads 1|2
# Reported: seconds, MB/s (input bytes / s, MB = 10^6 B), files/s, time relative to tar,
# peak RSS (/usr/bin/time -f %M), output bytes. Set c: pack time and peak RSS of a 1M-sample
# pack (warm cache: the files were just written), then bench_index_open (cold and warm,
# median of 7). JSON goes to --out FILE (else stdout, after the table on stderr).
set -u
set -o pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
SMALL=0
PACK=${HDMLP_PACK:-}
OPENB=${HDMLP_BENCH_INDEX_OPEN:-}
WORK=${TMPDIR:-/var/tmp}/hdmlp-bench-pack
OUT=
DO_OPEN=1
DROP_OK=1
KEEP=0
PYTHON=/usr/bin/python3
[ -x "$PYTHON" ] || PYTHON=$(command -v python3)

usage() { sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-2}"; }
while [ $# -gt 0 ]; do
    case $1 in
    --small) SMALL=1 ;;
    --pack) PACK=$2; shift ;;
    --open-bench) OPENB=$2; shift ;;
    --work) WORK=$2; shift ;;
    --out) OUT=$2; shift ;;
    --no-index-open) DO_OPEN=0 ;;
    --no-drop) DROP_OK=0 ;;
    --keep-data) KEEP=1 ;;
    -h | --help) usage 0 ;;
    *) echo "bench_pack: unknown option $1" >&2; usage ;;
    esac
    shift
done

# locate binaries (a build dir beside the source tree)
if [ -z "$PACK" ]; then
    for b in "$HERE"/../../build*/packer/hdmlp-pack; do
        [ -x "$b" ] && PACK=$b && break
    done
fi
[ -n "$PACK" ] && [ -x "$PACK" ] || { echo "bench_pack: hdmlp-pack not found (use --pack)" >&2; exit 2; }
PACK=$(cd "$(dirname "$PACK")" && pwd)/$(basename "$PACK")
if [ -z "$OPENB" ]; then
    for b in "$(dirname "$PACK")/../tests/bench_index_open" "$HERE"/../../build*/tests/bench_index_open; do
        [ -x "$b" ] && OPENB=$b && break
    done
fi
if [ ! -x /usr/bin/time ]; then
    echo "bench_pack: /usr/bin/time missing: apt-get install -y --no-install-recommends time" >&2
    exit 2
fi

if [ $SMALL = 1 ]; then
    NA=2000 NB=500 NC=5000
else
    NA=100000 NB=20000 NC=1000000
fi
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
RES=$WORK/results.tsv
: >"$RES"
export SOURCE_DATE_EPOCH=1700000000
log() { echo "bench_pack: $*" >&2; }

drop_caches() {
    [ $DROP_OK = 1 ] || return 0
    sync
    if ! (echo 3 >/proc/sys/vm/drop_caches) 2>/dev/null; then
        log "warning: cannot drop caches (not root?): runs are WARM"
        DROP_OK=0
    fi
}

# gen SET KIND COUNT: deterministic tree in WORK/data-SET-COUNT (reused if complete)
gen() {
    local dir=$WORK/data-$1-$3
    if [ -f "$dir.done" ]; then
        echo "$dir"
        return
    fi
    rm -rf "$dir" "$dir.done"
    log "generating set $1: $3 files ($2) in $dir"
    "$PYTHON" - "$dir" "$2" "$3" <<'EOF' >&2 || exit 1
import os, sys, time
import numpy as np
out, kind, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
rng = np.random.default_rng(20240601)
t0 = time.monotonic()
# pool of 4 KiB blocks: even blocks random (incompressible), odd blocks 16-symbol text
POOL = 64 << 20
blocks = POOL // 4096
pool = rng.integers(0, 256, POOL, dtype=np.uint8).reshape(blocks, 4096)
low = rng.integers(0, 16, (blocks // 2, 4096), dtype=np.uint8) + ord('a')
pool[1::2] = low
pool = pool.reshape(-1).tobytes()
if kind == "fixed16k":
    sizes = rng.integers(12 << 10, (20 << 10) + 1, n)
    classes = 100
elif kind == "lognormal":
    sigma = 0.75
    mu = np.log(110 << 10) - sigma * sigma / 2
    sizes = np.clip(rng.lognormal(mu, sigma, n), 2 << 10, 8 << 20).astype(np.int64)
    classes = 100
else:  # tiny
    sizes = rng.integers(16, 65, n)
    classes = 1000
offs = rng.integers(0, len(pool) - (8 << 20), n)
per = (n + classes - 1) // classes
for c in range(classes):
    os.makedirs(f"{out}/c{c:04d}", exist_ok=True)
total = 0
for i in range(n):
    s = int(sizes[i]); o = int(offs[i])
    fd = os.open(f"{out}/c{i // per:04d}/{i:07d}.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, pool[o:o + s])
    os.close(fd)
    total += s
with open(out + ".meta", "w") as f:
    f.write(f"{n}\t{total}\n")
print(f"  {n} files, {total / 1e6:.1f} MB in {time.monotonic() - t0:.1f} s", file=sys.stderr)
EOF
    touch "$dir.done"
    echo "$dir"
}

# timed NAME SET FILES BYTES OUTPATH CMD...: drop caches, run, append a result row
timed() {
    local name=$1 set=$2 files=$3 bytes=$4 outp=$5
    shift 5
    rm -rf "$outp"
    drop_caches
    # load the programs (not the data) again so both contenders start equally warm
    "$PACK" --version >/dev/null 2>&1
    tar --version >/dev/null 2>&1
    sync --version >/dev/null 2>&1
    if ! /usr/bin/time -f '%e %M' -o "$WORK/time.txt" "$@" >"$WORK/cmd.out" 2>"$WORK/cmd.err"; then
        log "FAILED: $*"
        cat "$WORK/cmd.err" >&2
        exit 1
    fi
    local secs rss obytes
    read -r secs rss <"$WORK/time.txt"
    obytes=$(du -sb "$outp" | cut -f1)
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$set" "$name" "$files" "$bytes" "$secs" "$rss" \
        "$obytes" "$([ $DROP_OK = 1 ] && echo cold || echo warm)" >>"$RES"
    log "$(printf '%-3s %-22s %7.2f s  peak RSS %7d KiB' "$set" "$name" "$secs" "$rss")"
    rm -rf "$outp"
}

for spec in "a fixed16k $NA" "b lognormal $NB"; do
    # shellcheck disable=SC2086
    set -- $spec
    DATA=$(gen "$1" "$2" "$3") || exit 1
    read -r files bytes <"$DATA.meta"
    timed "tar" "$1" "$files" "$bytes" "$WORK/out.tar" \
        sh -c 'tar -cf "$1" -C "$2" . && sync "$1"' sh "$WORK/out.tar" "$DATA"
    for c in none zstd:1; do
        for t in 1 2; do
            timed "pack $c t$t" "$1" "$files" "$bytes" "$WORK/out.ds" \
                "$PACK" --quiet --compress "$c" --threads "$t" -o "$WORK/out.ds" "$DATA"
        done
    done
    [ $KEEP = 1 ] || { rm -rf "$DATA" "$DATA.done" "$DATA.meta"; }
done

OPEN_JSON=
if [ $DO_OPEN = 1 ]; then
    DATA=$(gen c tiny "$NC") || exit 1
    read -r files bytes <"$DATA.meta"
    # warm: the tiny files were just written (dropping caches would make this a test of
    # 1M cold opens, not of the packer); the output is kept for the open benchmark
    rm -rf "$WORK/tiny.ds"
    sync
    /usr/bin/time -f '%e %M' -o "$WORK/time.txt" \
        "$PACK" --quiet --compress none --threads 2 -o "$WORK/tiny.ds" "$DATA" 2>"$WORK/cmd.err" ||
        { cat "$WORK/cmd.err" >&2; exit 1; }
    read -r secs rss <"$WORK/time.txt"
    printf 'c\tpack none t2 (tiny)\t%s\t%s\t%s\t%s\t%s\twarm\n' "$files" "$bytes" "$secs" "$rss" \
        "$(du -sb "$WORK/tiny.ds" | cut -f1)" >>"$RES"
    log "c   pack of $files tiny files: $secs s, peak RSS $rss KiB"
    if [ -n "$OPENB" ] && [ -x "$OPENB" ]; then
        if [ $DROP_OK = 1 ]; then
            cold=$("$OPENB" "$WORK/tiny.ds" --runs 5 --cold) || exit 1
        else
            cold=null
        fi
        warm=$("$OPENB" "$WORK/tiny.ds" --runs 7) || exit 1
        OPEN_JSON="{\"cold\": $cold, \"warm\": $warm}"
        log "index open cold: $cold"
        log "index open warm: $warm"
    else
        log "warning: bench_index_open not found (build target bench_index_open); open not timed"
    fi
    [ $KEEP = 1 ] || rm -rf "$DATA" "$DATA.done" "$DATA.meta" "$WORK/tiny.ds"
fi

# table (stderr) + JSON (stdout or --out)
"$PYTHON" - "$RES" "${OPEN_JSON:-null}" "$SMALL" "$PACK" "${OUT:-}" <<'EOF'
import json, os, platform, sys, time
res, open_json, small, pack, out = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4], sys.argv[5]
rows = [l.rstrip("\n").split("\t") for l in open(res) if l.strip()]
runs, tar = [], {}
for s, name, files, nbytes, secs, rss, obytes, cache in rows:
    r = dict(set=s, run=name, files=int(files), input_bytes=int(nbytes), seconds=float(secs),
             peak_rss_kib=int(rss), output_bytes=int(obytes), cache=cache)
    sec = max(r["seconds"], 1e-3)
    r["mb_per_s"] = round(r["input_bytes"] / 1e6 / sec, 1)
    r["files_per_s"] = round(r["files"] / sec)
    r["output_ratio"] = round(r["output_bytes"] / max(r["input_bytes"], 1), 3)
    if name == "tar":
        tar[s] = sec
    r["time_vs_tar"] = round(sec / tar[s], 2) if s in tar else None
    runs.append(r)
doc = dict(benchmark="pack", small=small, date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           host=dict(cpus=os.cpu_count(), kernel=platform.release()), hdmlp_pack=pack, runs=runs,
           index_open=json.loads(open_json))
hdr = f"{'set':3} {'run':24} {'files':>8} {'MB':>8} {'s':>7} {'MB/s':>7} {'files/s':>8} {'vs tar':>6} {'RSS MiB':>8} {'out/in':>6} cache"
lines = [hdr, "-" * len(hdr)]
for r in runs:
    vt = f"{r['time_vs_tar']:.2f}" if r["time_vs_tar"] is not None else "-"
    lines.append(f"{r['set']:3} {r['run']:24} {r['files']:>8} {r['input_bytes']/1e6:>8.1f} {r['seconds']:>7.2f} "
                 f"{r['mb_per_s']:>7.1f} {r['files_per_s']:>8} {vt:>6} {r['peak_rss_kib']/1024:>8.1f} "
                 f"{r['output_ratio']:>6.3f} {r['cache']}")
oj = doc["index_open"]
if oj:
    for k in ("cold", "warm"):
        o = oj[k]
        if o is None:
            continue
        lines.append(f"index open ({k}, {o['samples']} samples, index {o['index_bytes']/1e6:.1f} MB): "
                     f"median {o['open_s_median']*1e3:.1f} ms (min {o['open_s_min']*1e3:.1f}, max "
                     f"{o['open_s_max']*1e3:.1f}), RSS growth {o['rss_growth_kib_median']/1024:.1f} MiB; "
                     f"goal < 0.5 s: {'met' if o['goal_open_lt_0_5_s'] else 'NOT met'}")
print("\n".join(lines), file=sys.stderr)
text = json.dumps(doc, indent=1)
if out:
    with open(out, "w") as f:
        f.write(text + "\n")
    print(f"bench_pack: JSON written to {out}", file=sys.stderr)
else:
    print(text)
EOF
