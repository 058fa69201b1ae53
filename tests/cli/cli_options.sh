#!/bin/bash
# Packing options on real data (2,000 Fashion-MNIST images as raw PGM, compressible):
# chunk size K in {1, 7, 64}, --compress none / zstd:1 / auto / --dict, --segment-size 0
# (one chunk per file) and default, --threads; reproducibility (same inputs + seed +
# SOURCE_DATE_EPOCH -> byte-identical directory) and that another seed gives another order.
source "$(dirname "$0")/lib.sh"
need_dsdump

N=2000
gen_fmnist "$T/fm" --limit-train $N --limit-test 0 --format pgm
SRC=$T/fm/train
export SOURCE_DATE_EPOCH=1700000000

# check DIR K WHAT: verify, header counts, bytes vs sources, segment files on disk.
check() {
    local dir=$1 k=$2 what=$3 c s
    verify_ok "$dir" "$what"
    [ "$(hdr "$dir" samples)" = $N ] || fail "$what: samples != $N"
    [ "$(hdr "$dir" chunk_size)" = "$k" ] || fail "$what: chunk_size $(hdr "$dir" chunk_size) != $k"
    c=$(hdr "$dir" chunks)
    [ "$c" = $(((N + k - 1) / k)) ] || fail "$what: chunk count $c != ceil($N/$k)"
    "$DSDUMP" --root "$SRC" "$dir" >"$T/dump.txt" 2>"$T/dump.err" ||
        { head -5 "$T/dump.err" >&2; fail "$what: samples differ from the source files"; }
    grep -v '^#' "$T/dump.txt" >"$T/samples.txt"
    # chunk/slot columns follow index / K, index % K
    awk -F'\t' -v k="$k" '$7 != int($1 / k) || $8 != $1 % k { print; exit 1 }' "$T/samples.txt" \
        >/dev/null || fail "$what: chunk/slot of a sample are not index/K, index%K"
    s=$(hdr "$dir" segments)
    [ "$(find "$dir" -maxdepth 1 -name 'segment-*' | wc -l)" = "$s" ] ||
        fail "$what: $s segments in the index but $(ls "$dir" | grep -c '^segment-') files"
    [ -f "$dir/segment-000000" ] || fail "$what: no segment-000000"
    local bad
    bad=$(find "$dir" -maxdepth 1 -name 'segment-*' -printf '%s %p\n' | awk '$1 % 4096 != 0' | head -1)
    [ -z "$bad" ] || fail "$what: segment size not a multiple of 4096: $bad"
    no_temp_left "$dir" "$what"
    ok
}
codecs() { cut -f6 "$T/samples.txt" | sort -u | tr '\n' ' '; }

# K=1, no compression, default segments (one chunk per file is tested with --dict below;
# K=1 with one file per chunk means 2,000 fsynced files: slow, not more coverage)
pk_ok --quiet --seed 1 --chunk-size 1 --compress none -o "$T/k1" "$SRC"
check "$T/k1" 1 "K=1 none"
[ "$(hdr "$T/k1" segments)" = 1 ] || fail "K=1 default segment size: $(hdr "$T/k1" segments) segments for 4 MB"
[ "$(codecs)" = "0 " ] || fail "K=1 none: codecs are '$(codecs)', expected only 0"
[ "$(hdr "$T/k1" raw_bytes)" = "$(hdr "$T/k1" stored_bytes)" ] || fail "none: stored != raw bytes"
ok

# K=7, zstd level 1, default segments
pk_ok --quiet --seed 1 --chunk-size 7 --compress zstd:1 -o "$T/k7" "$SRC"
check "$T/k7" 7 "K=7 zstd:1"
[ "$(hdr "$T/k7" segments)" -lt 10 ] || fail "K=7 default segment size: $(hdr "$T/k7" segments) segments for 4 MB"
case "$(codecs)" in *2*) fail "zstd:1 without --dict: codec 2 used";; esac
[ "$(hdr "$T/k7" stored_bytes)" -lt "$(hdr "$T/k7" raw_bytes)" ] || fail "zstd:1 did not shrink PGM data"
ok

# K=64, auto
pk_ok --quiet --seed 1 --chunk-size 64 --compress auto -o "$T/k64" "$SRC"
# --chunk-size auto (the default): ~1 MiB chunks, at least 64 samples, at most N/256 when more.
# 2,000 images of ~800 B: 64. 30,000 members of 16 B: N/256 = 117 (1 MiB would be 65,536).
pk_ok --quiet --seed 1 --compress none -o "$T/kauto" "$SRC"
[ "$(hdr "$T/kauto" chunk_size)" = 64 ] || fail "auto K of 800-byte images: $(hdr "$T/kauto" chunk_size)"
python3 - "$T/tiny.tar" <<'PY'
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w") as t:
    for i in range(30000):
        data = b"%016d" % i
        m = tarfile.TarInfo("c%d/%05d.bin" % (i % 3, i))
        m.size = len(data)
        t.addfile(m, io.BytesIO(data))
PY
pk_ok --quiet --seed 1 --chunk-size auto -o "$T/ktiny" "$T/tiny.tar"
[ "$(hdr "$T/ktiny" chunk_size)" = 117 ] || fail "auto K of 16-byte samples: $(hdr "$T/ktiny" chunk_size)"
verify_ok "$T/ktiny" "auto K of 16-byte samples"
pk --quiet --chunk-size 0 -o "$T/k0" "$SRC"
expect_rc 2 "--chunk-size 0"
check "$T/k64" 64 "K=64 auto"
note "auto chose codecs: $(codecs)"

# K=7, zstd with a trained dictionary, one chunk per file
pk_ok --quiet --seed 1 --chunk-size 7 --compress zstd:3 --dict --segment-size 0 -o "$T/dict" "$SRC"
check "$T/dict" 7 "K=7 zstd:3 --dict seg0"
[ "$(hdr "$T/dict" segments)" = "$(hdr "$T/dict" chunks)" ] || fail "--segment-size 0: segments != chunks"
case "$(codecs)" in *2*) ;; *) fail "--dict: no sample uses the dictionary (codecs: $(codecs))";; esac
[ "$(hdr "$T/dict" stored_bytes)" -lt "$(hdr "$T/k7" stored_bytes)" ] ||
    note "(--dict did not beat plain zstd: $(hdr "$T/dict" stored_bytes) vs $(hdr "$T/k7" stored_bytes))"
ok

# K=64, small segments: several chunks per segment, several segments
pk_ok --quiet --seed 1 --chunk-size 64 --compress none --segment-size 262144 -o "$T/seg" "$SRC"
check "$T/seg" 64 "K=64 segment-size 256 KiB"
s=$(hdr "$T/seg" segments)
[ "$s" -gt 1 ] && [ "$s" -lt "$(hdr "$T/seg" chunks)" ] ||
    fail "--segment-size 262144: $s segments for $(hdr "$T/seg" chunks) chunks"
ok

# The shuffle is global: the first chunk of K=64 mixes classes and keys are not sorted.
grep -v '^#' <("$DSDUMP" "$T/k64") >"$T/samples.txt"
[ "$(head -64 "$T/samples.txt" | cut -f2 | sort -u | wc -l)" -ge 6 ] ||
    fail "K=64: first chunk holds fewer than 6 of 10 classes (not shuffled?)"
cut -f3 "$T/samples.txt" | LC_ALL=C sort -c 2>/dev/null && fail "packed order is the sorted key order"
ok

# Reproducibility: same inputs + seed + SOURCE_DATE_EPOCH -> identical bytes, any --threads
for t in 1 2; do
    pk_ok --quiet --seed 7 --chunk-size 7 --compress zstd:1 --dict --threads $t -o "$T/r$t" "$SRC"
done
pk_ok --quiet --seed 7 --chunk-size 7 --compress zstd:1 --dict --threads 2 -o "$T/r3" "$SRC"
h1=$(tree_hash "$T/r1")
[ "$h1" = "$(tree_hash "$T/r3")" ] || fail "same seed + SOURCE_DATE_EPOCH, --threads 1: output differs"
[ "$(tree_hash "$T/r2")" = "$(tree_hash "$T/r3")" ] || fail "same seed, --threads 2 twice: output differs"
[ "$h1" = "$(tree_hash "$T/r2")" ] || fail "--threads 1 and --threads 2 give different bytes"
ok
pk_ok --quiet --seed 7 --chunk-size 64 -o "$T/p1" "$SRC"
pk_ok --quiet --seed 7 --chunk-size 64 -o "$T/p2" "$SRC"
cmp -s "$T/p1/index" "$T/p2/index" || fail "default compression, same seed: index differs"
ok

# Another seed -> another order (same multiset of keys)
pk_ok --quiet --seed 8 --chunk-size 64 -o "$T/p3" "$SRC"
dump "$T/p1" | cut -f3 >"$T/o1"
dump "$T/p3" | cut -f3 >"$T/o3"
cmp -s "$T/o1" "$T/o3" && fail "--seed 7 and --seed 8 give the same order"
[ "$(paste "$T/o1" "$T/o3" | awk -F'\t' '$1 == $2' | wc -l)" -lt 50 ] ||
    fail "--seed 7 and --seed 8 orders agree in too many positions"
cmp -s <(LC_ALL=C sort "$T/o1") <(LC_ALL=C sort "$T/o3") || fail "seeds 7 and 8 hold different key sets"
[ "$(hdr "$T/p3" seed)" = 8 ] || fail "stored pack seed is $(hdr "$T/p3" seed), expected 8"
ok

# created uses SOURCE_DATE_EPOCH: index bytes 64..71 (little-endian u64)
created=$(od -An -t u8 -j 64 -N 8 "$T/p1/index" | tr -d ' ')
[ "$created" = 1700000000 ] || fail "created = $created, expected SOURCE_DATE_EPOCH 1700000000"
ok

finish
