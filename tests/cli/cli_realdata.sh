#!/bin/bash
# Real data: 2,000 Fashion-MNIST PNGs as a class tree, as a tar.gz and as a --list manifest.
# Each pack must --verify, hold every source file byte for byte under its key with the
# right label, and --extract by key and by index must give the source bytes back.
source "$(dirname "$0")/lib.sh"
need_dsdump

N=2000
gen_fmnist "$T/fm" --limit-train $N --limit-test 0 --tar-gz "$T/train.tar.gz"
[ "$(find "$T/fm/train" -type f | wc -l)" = $N ] || fail "generator made the wrong number of files"

# check_pack DIR ROOT WHAT: verify, N samples, all bytes equal ROOT/KEY, label = top dir.
check_pack() {
    local dir=$1 root=$2 what=$3
    verify_ok "$dir" "$what"
    [ "$(hdr "$dir" samples)" = $N ] || fail "$what: sample count $(hdr "$dir" samples) != $N"
    "$DSDUMP" --root "$root" "$dir" >"$T/dump.txt" 2>"$T/dump.err" ||
        { head -5 "$T/dump.err" >&2; fail "$what: samples differ from the source files"; }
    grep -v '^#' "$T/dump.txt" >"$T/samples.txt"
    [ "$(wc -l <"$T/samples.txt")" = $N ] || fail "$what: dsdump listed the wrong sample count"
    # label name == first path component of the key (class directory)
    awk -F'\t' '{ split($3, p, "/"); if (p[1] != $2) { print; exit 1 } }' "$T/samples.txt" \
        >"$T/badlabel.txt" || fail "$what: label does not match class dir: $(cat "$T/badlabel.txt")"
    # keys are exactly the relative paths, each once
    cut -f3 "$T/samples.txt" | LC_ALL=C sort >"$T/keys.txt"
    (cd "$root" && find . -type f | sed 's|^\./||' | LC_ALL=C sort) >"$T/files.txt"
    cmp -s "$T/keys.txt" "$T/files.txt" || fail "$what: keys are not the set of relative paths"
    # labels: the 10 class dirs in sorted bytewise order
    grep '^# label' "$T/dump.txt" | cut -f3 >"$T/labels.txt"
    (cd "$root" && ls -1 | LC_ALL=C sort) >"$T/classes.txt"
    cmp -s "$T/labels.txt" "$T/classes.txt" ||
        fail "$what: label table is not the class dirs in bytewise order: $(tr '\n' ' ' <"$T/labels.txt")"
    ok
}

# extract_some DIR ROOT WHAT: --extract by key (to a file and to stdout) and by index.
extract_some() {
    local dir=$1 root=$2 what=$3 idx key n=0
    while IFS=$'\t' read -r idx _ key _; do
        pk --extract "$dir" "$key" -o "$T/x.bin"
        [ "$RC" = 0 ] || fail "$what: --extract by key '$key' failed"
        cmp -s "$T/x.bin" "$root/$key" || fail "$what: --extract '$key' bytes differ"
        pk --extract "$dir" "$idx" -o "$T/y.bin"
        [ "$RC" = 0 ] || fail "$what: --extract by index $idx failed"
        cmp -s "$T/y.bin" "$root/$key" || fail "$what: --extract index $idx bytes differ"
        n=$((n + 1))
    done < <(awk 'NR % 97 == 1' "$T/samples.txt")
    [ $n -gt 10 ] || fail "$what: too few samples extracted ($n)"
    # to stdout, no -o
    IFS=$'\t' read -r idx _ key _ < <(sed -n '5p' "$T/samples.txt")
    LAST_CMD="hdmlp-pack --extract $dir $key (stdout)"
    "$PACK" --extract "$dir" "$key" >"$T/z.bin" 2>"$LOG/stderr" || fail "$what: --extract to stdout failed"
    cmp -s "$T/z.bin" "$root/$key" || fail "$what: --extract to stdout bytes differ"
    # unknown key / index out of range: exit 1, named
    pk --extract "$dir" "no/such/key.png" -o "$T/n.bin"
    expect_rc 1 "$what: --extract unknown key"
    expect_stderr 'no/such/key|not found' "$what: --extract unknown key"
    pk --extract "$dir" 999999 -o "$T/n.bin"
    expect_fail "$what: --extract index out of range"
    ok
}

# 1. directory tree
export SOURCE_DATE_EPOCH=1700000000
pk_ok --quiet --seed 42 -o "$T/tree.ds" "$T/fm/train"
check_pack "$T/tree.ds" "$T/fm/train" "tree"
extract_some "$T/tree.ds" "$T/fm/train" "tree"
cp "$T/samples.txt" "$T/tree.samples"

pk --info "$T/tree.ds"
expect_rc 0 "--info"
grep -q "$N" "$LOG/stdout" || fail "--info does not show the sample count $N"
grep -q 'Ankle_boot' "$LOG/stdout" || note "(--info does not list label names)"
ok

# 2. tar.gz of the same tree: same keys, labels and bytes; same seed -> same order
pk_ok --quiet --seed 42 -o "$T/tar.ds" "$T/train.tar.gz"
check_pack "$T/tar.ds" "$T/fm/train" "tar.gz"
extract_some "$T/tar.ds" "$T/fm/train" "tar.gz"
cut -f2-5 "$T/tree.samples" >"$T/a.txt"
cut -f2-5 "$T/samples.txt" >"$T/b.txt"
cmp -s "$T/a.txt" "$T/b.txt" || fail "tree and tar.gz of the same files, same seed: different packed order"
ok

# 3. --list manifest (paths relative to the manifest's directory, which is also the cwd)
(cd "$T/fm" && timeout 60 "$PACK" --quiet --seed 42 -o "$T/list.ds" --list train.tsv \
    >"$LOG/stdout" 2>"$LOG/stderr")
RC=$?
LAST_CMD="(cd fm) hdmlp-pack --seed 42 -o list.ds --list train.tsv"
expect_rc 0 "--list"
verify_ok "$T/list.ds" "--list"
"$DSDUMP" --root "$T/fm" "$T/list.ds" >"$T/dump.txt" 2>"$T/dump.err" ||
    { head -5 "$T/dump.err" >&2; fail "--list: samples differ from the listed files"; }
grep -v '^#' "$T/dump.txt" | awk -F'\t' '{ print $3 "\t" $2 }' | LC_ALL=C sort >"$T/a.txt"
LC_ALL=C sort "$T/fm/train.tsv" >"$T/b.txt"
cmp -s "$T/a.txt" "$T/b.txt" || fail "--list: (key, label) pairs differ from the manifest"
ok

# 4. several inputs at once: the tree and the tar.gz (same keys twice) -> 2N samples
pk_ok --quiet -o "$T/both.ds" "$T/fm/train" "$T/train.tar.gz"
verify_ok "$T/both.ds" "two inputs"
[ "$(hdr "$T/both.ds" samples)" = $((2 * N)) ] || fail "two inputs: expected $((2 * N)) samples"
ok

finish
