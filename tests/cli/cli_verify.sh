#!/bin/bash
# --verify (and --extract/--info) on corrupted datasets: a flipped payload byte -> exit 1
# naming the chunk and sample; a flipped chunk header byte -> names the chunk; a truncated
# or missing segment and a damaged index -> non-zero with a message.
source "$(dirname "$0")/lib.sh"
need_dsdump

gen_fmnist "$T/fm" --limit-train 210 --limit-test 0 --format pgm
# All PGM files have the same size, so with --compress none every sample is S bytes.
S=$(stat -c %s "$T/fm/train/Bag/$(ls "$T/fm/train/Bag" | head -1)")
pk_ok --quiet --seed 3 --chunk-size 7 --compress none --segment-size 0 -o "$T/ds" "$T/fm/train"
verify_ok "$T/ds" "pristine"
[ "$(hdr "$T/ds" segments)" = 30 ] || fail "expected 30 one-chunk segments"

# flip FILE OFFSET: xor one byte with 0xff
flip() {
    local v
    v=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
    [ -n "$v" ] || fail "flip: $1 has no byte at $2"
    printf "\\$(printf %03o $((v ^ 255)))" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}
fresh() { rm -rf "$T/bad" && cp -r "$T/ds" "$T/bad"; }
# expect_names WHAT ERE...: the failing run's stdout+stderr matches every ERE
expect_names() {
    local what=$1
    shift
    for re in "$@"; do
        cat "$LOG/stdout" "$LOG/stderr" | grep -qiE -- "$re" || fail "$what: message does not match /$re/"
    done
    ok
}

# 1. payload byte of chunk 5, slot 1 (sample 36)
fresh
flip "$T/bad/segment-000005" $((64 + S + 40))
pk --verify "$T/bad"
expect_rc 1 "--verify, flipped payload byte"
expect_names "--verify, flipped payload byte" 'chunk[^0-9]{0,3}5([^0-9]|$)' 'sample[^0-9]{0,3}36([^0-9]|$)'
grep -q 'OK' "$LOG/stdout" && fail "--verify printed OK for a corrupt dataset"
pk --extract "$T/bad" 36 -o "$T/x.bin"
expect_rc 1 "--extract of the corrupted sample"
expect_names "--extract of the corrupted sample" 'sample[^0-9]{0,3}36([^0-9]|$)'
[ ! -s "$T/x.bin" ] || fail "--extract of a corrupt sample left output in the -o file"
pk --extract "$T/bad" 35 -o "$T/y.bin"
expect_rc 0 "--extract of an intact sample in a damaged dataset"

# 2. payload byte of the first sample of chunk 0
fresh
flip "$T/bad/segment-000000" 70
pk --verify "$T/bad"
expect_rc 1 "--verify, flipped byte in sample 0"
expect_names "--verify, flipped byte in sample 0" 'chunk[^0-9]{0,3}0([^0-9]|$)' 'sample[^0-9]{0,3}0([^0-9]|$)'

# 3. chunk header byte (chunk 3's n_samples field)
fresh
flip "$T/bad/segment-000003" 24
pk --verify "$T/bad"
expect_rc 1 "--verify, flipped chunk header byte"
expect_names "--verify, flipped chunk header byte" 'chunk[^0-9]{0,3}3([^0-9]|$)'

# 4. a byte in the zero padding after the last chunk is not data: --verify reports it
#    or ignores it, but must not crash.
fresh
flip "$T/bad/segment-000004" 4095
pk --verify "$T/bad"
[ "$RC" = 0 ] || [ "$RC" = 1 ] || fail "--verify, flipped padding byte: exit $RC"
ok

# 5. truncated segment
fresh
truncate -s 4096 "$T/bad/segment-000010"
pk --verify "$T/bad"
expect_fail "--verify, truncated segment"
expect_names "--verify, truncated segment" 'segment-000010|chunk[^0-9]{0,3}10([^0-9]|$)'
fresh
truncate -s 0 "$T/bad/segment-000029"
pk --verify "$T/bad"
expect_fail "--verify, segment truncated to 0"
grep -q 'hdmlp-pack: ' "$LOG/stderr" || fail "--verify, segment truncated to 0: no message"

# 6. missing segment
fresh
rm "$T/bad/segment-000007"
pk --verify "$T/bad"
expect_fail "--verify, missing segment"
expect_names "--verify, missing segment" 'segment-000007|chunk[^0-9]{0,3}7([^0-9]|$)'

# 7. damaged index: a flipped byte, a truncation, no index
fresh
flip "$T/bad/index" $(($(stat -c %s "$T/bad/index") / 2))
pk --verify "$T/bad"
expect_fail "--verify, flipped index byte"
expect_names "--verify, flipped index byte" 'index|checksum|corrupt'
pk --info "$T/bad"
expect_fail "--info, flipped index byte"
fresh
truncate -s 100 "$T/bad/index"
pk --verify "$T/bad"
expect_fail "--verify, truncated index"
fresh
rm "$T/bad/index"
pk --verify "$T/bad"
expect_fail "--verify, no index"
expect_names "--verify, no index" 'index|not a dataset|not found|no such'
pk --verify "$T/does-not-exist"
expect_fail "--verify of a missing directory"
expect_stderr_fixed "does-not-exist" "--verify of a missing directory"

# 8. a segment from another dataset (same layout, other seed): dataset_id differs
pk_ok --quiet --seed 4 --chunk-size 7 --compress none --segment-size 0 -o "$T/other" "$T/fm/train"
fresh
cp "$T/other/segment-000002" "$T/bad/segment-000002"
pk --verify "$T/bad"
expect_rc 1 "--verify, segment from another dataset"
expect_names "--verify, segment from another dataset" 'chunk[^0-9]{0,3}2([^0-9]|$)'

finish
