#!/bin/bash
# Nothing lost or invented quietly (issue 25 item 9):
#   - symbolic links: followed in directories (to files and directories; a link to a
#     directory it is inside of is a loop: skipped); in archives resolved to the member they
#     name (relative to their directory, through other links, in any archive order);
#     links naming nothing in the archive, a directory, or a loop, and special members, are
#     skipped. Whatever is skipped is counted by reason in the summary (and warned about).
#   - labels without samples are named in a summary warning (and on stderr with --quiet).
#   - an input that is or contains an hdmlp dataset is refused naming it, unless
#     --skip-nested (left out, counted) or --allow-nested (packed as samples); OUT inside an
#     input is never packed into itself, even when it is replaced (--force).
source "$(dirname "$0")/lib.sh"
need_dsdump

# keys DS: "key<TAB>label" lines, sorted
keys() { dump "$1" | awk -F'\t' '{ print $3 "\t" $2 }' | LC_ALL=C sort; }
# expect_keys DS WHAT LINE...: keys DS are exactly the given "key<TAB>label" lines
expect_keys() {
    local ds=$1 what=$2
    shift 2
    keys "$ds" >"$T/got"
    printf '%s\n' "$@" | LC_ALL=C sort >"$T/want"
    cmp -s "$T/got" "$T/want" ||
        fail "$what: (key, label) pairs: got [$(tr '\t\n' '= ' <"$T/got")], want [$(tr '\t\n' '= ' <"$T/want")]"
    ok
}
# expect_out PATTERN WHAT: stdout (the summary) matches the extended regex
expect_out() {
    grep -qE -- "$1" "$LOG/stdout" || fail "$2: the summary does not match /$1/"
    ok
}

# --- archives: symbolic link members ----------------------------------------------------
"$PYTHON" - "$T" <<'EOF' || fail "could not build the test archives"
import io, os, sys, tarfile
t = sys.argv[1]
def add(tf, name, kind, body=None):
    ti = tarfile.TarInfo(name)
    ti.mtime = 1
    if kind == "dir":
        ti.type, ti.mode = tarfile.DIRTYPE, 0o755
        tf.addfile(ti)
    elif kind == "link":
        ti.type, ti.linkname = tarfile.SYMTYPE, body
        tf.addfile(ti)
    elif kind == "fifo":
        ti.type = tarfile.FIFOTYPE
        tf.addfile(ti)
    else:
        ti.size = len(body)
        tf.addfile(ti, io.BytesIO(body))
with tarfile.open(t + "/links.tar", "w", format=tarfile.GNU_FORMAT) as tf:
    add(tf, "cat", "dir")
    add(tf, "cat/early", "link", "a.bin")           # before its target: resolved at the end
    add(tf, "cat/a.bin", "file", b"A" * 3000)
    add(tf, "dog", "dir")
    add(tf, "dog/b.bin", "file", b"bee")
    add(tf, "dog/cross", "link", "../cat/a.bin")     # another label, same bytes
    add(tf, "dog/chain", "link", "cross")            # through another link
    add(tf, "dog/catdir", "link", "../cat")          # a directory: skipped
    add(tf, "dog/via", "link", "catdir/a.bin")       # through a linked directory: resolved
    add(tf, "dog/abs", "link", "/etc/passwd")        # absolute: names nothing in the archive
    add(tf, "dog/above", "link", "../../b.bin")      # above the root: names nothing
    add(tf, "dog/gone", "link", "nowhere.bin")       # missing
    add(tf, "dog/loop1", "link", "loop2")            # a loop
    add(tf, "dog/loop2", "link", "loop1")
    add(tf, "dog/pipe", "fifo")                      # special member
    add(tf, "empty", "dir")                          # a label with no samples
    add(tf, "onlylinks", "dir")                      # a label whose only member is skipped
    add(tf, "onlylinks/x", "link", "/nowhere")
EOF

pk_ok --seed 1 -o "$T/links.ds" "$T/links.tar"
verify_ok "$T/links.ds" "tar with symlinks"
expect_keys "$T/links.ds" "tar with symlinks" \
    $'cat/a.bin\tcat' $'cat/early\tcat' $'dog/b.bin\tdog' $'dog/cross\tdog' $'dog/chain\tdog' \
    $'dog/via\tdog'
for k in cat/early dog/cross dog/chain dog/via; do
    "$PACK" --extract "$T/links.ds" "$k" >"$T/x.bin" || fail "--extract $k failed"
    [ "$(cat "$T/x.bin")" = "$(printf 'A%.0s' $(seq 3000))" ] || fail "$k: not the bytes of cat/a.bin"
done
ok
pk_ok --seed 1 -o "$T/links.ds" -f "$T/links.tar"
expect_out 'Skipped 8 input entries' "tar with symlinks"
expect_out 'naming no member of the archive \(4\)' "tar: links naming nothing"
expect_out 'to a directory of the archive \(1\)' "tar: a link to a directory"
expect_out 'in a loop \(2\)' "tar: a loop"
expect_out 'special members \(fifos, devices, sockets\) \(1\)' "tar: a fifo member"
expect_out '^Warning: 2 of 4 labels have no samples: empty, onlylinks$' "tar: labels without samples"
grep -q 'dog/abs -> /etc/passwd' "$LOG/stderr" || fail "tar: no warning names the skipped link dog/abs"
ok
# --quiet: no summary, but what was lost still goes to stderr
pk_ok --quiet --seed 1 -f -o "$T/links.ds" "$T/links.tar"
[ ! -s "$LOG/stdout" ] || fail "--quiet printed a summary"
grep -q '^hdmlp-pack: warning: skipped 8 input entries' "$LOG/stderr" ||
    fail "--quiet: the skipped entries are not reported on stderr"
grep -q '^hdmlp-pack: warning: 2 of 4 labels have no samples: empty, onlylinks$' "$LOG/stderr" ||
    fail "--quiet: labels without samples are not reported on stderr"
ok

# --- directories: symbolic links followed, loops skipped, empty labels named -------------
mkdir -p "$T/tree/cat" "$T/tree/dog/deep" "$T/tree/empty" "$T/elsewhere/fish"
printf 'cat' >"$T/tree/cat/1.bin"
printf 'dog' >"$T/tree/dog/2.bin"
printf 'fish' >"$T/elsewhere/fish/3.bin"
ln -s ../elsewhere/fish "$T/tree/fish"               # a class folder that is a link
ln -s ../../../elsewhere/fish "$T/tree/dog/deep/fl"  # a linked directory below a class
ln -s ../cat/1.bin "$T/tree/dog/alias.bin"           # a linked file
ln -s . "$T/tree/cat/self"                           # loops
ln -s ../.. "$T/tree/dog/deep/top"
pk_ok --seed 1 -o "$T/tree.ds" "$T/tree"
verify_ok "$T/tree.ds" "tree with symlinks"
expect_keys "$T/tree.ds" "tree with symlinks" \
    $'cat/1.bin\tcat' $'dog/2.bin\tdog' $'dog/alias.bin\tdog' $'dog/deep/fl/3.bin\tdog' \
    $'fish/3.bin\tfish'
pk_ok --seed 1 -f -o "$T/tree.ds" "$T/tree"
expect_out 'Skipped 2 input entries: symbolic links in a loop \(2\)\.' "tree: loops"
expect_out '^Warning: 1 of 4 labels have no samples: empty$' "tree: an empty class folder"
grep -q 'tree/cat/self' "$LOG/stderr" || fail "tree: no warning names the loop cat/self"
ok
# nothing skipped, no empty label: no such lines
mkdir -p "$T/plain/a"
printf 'x' >"$T/plain/a/x"
pk_ok --seed 1 -o "$T/plain.ds" "$T/plain"
! grep -qE 'Skipped|Warning' "$LOG/stdout" || fail "a clean input got a skipped or warning line"
ok

# --- nested datasets ---------------------------------------------------------------------
# OUT inside its own input: the temporary directory is not packed
mkdir -p "$T/in/cat" "$T/in/dog"
printf 'one' >"$T/in/cat/1.bin"
printf 'two' >"$T/in/dog/2.bin"
pk_ok --seed 1 -o "$T/in/packed" "$T/in"
expect_keys "$T/in/packed" "OUT inside its input" $'cat/1.bin\tcat' $'dog/2.bin\tdog'
# packing that folder again: refused, naming the dataset inside
pk --seed 1 -o "$T/again.ds" "$T/in"
expect_rc 1 "an input holding a dataset"
expect_stderr_fixed "$T/in/packed" "an input holding a dataset"
expect_stderr 'hdmlp dataset' "an input holding a dataset"
expect_stderr_fixed "--skip-nested" "an input holding a dataset"
nothing_left "$T/again.ds" "an input holding a dataset"
# a dataset deeper down (inside a class folder) too
mkdir -p "$T/in2/cat"
printf 'one' >"$T/in2/cat/1.bin"
cp -r "$T/in/packed" "$T/in2/cat/old"
pk --seed 1 -o "$T/again.ds" "$T/in2"
expect_rc 1 "a class folder holding a dataset"
expect_stderr_fixed "$T/in2/cat/old" "a class folder holding a dataset"
# a dataset given as the input itself
pk --seed 1 -o "$T/again.ds" "$T/in/packed"
expect_rc 1 "a dataset as input"
expect_stderr_fixed "$T/in/packed" "a dataset as input"
expect_stderr 'is an hdmlp dataset' "a dataset as input"
nothing_left "$T/again.ds" "a dataset as input"
# --skip-nested: left out and counted; the label it would have defined does not exist
pk_ok --seed 1 --skip-nested -o "$T/again.ds" "$T/in"
expect_keys "$T/again.ds" "--skip-nested" $'cat/1.bin\tcat' $'dog/2.bin\tdog'
[ "$(hdr "$T/again.ds" labels)" = 2 ] || fail "--skip-nested: the dataset defined a label"
expect_out 'hdmlp datasets \(directories, or archive members\) \(1\)' "--skip-nested"
grep -qF "$T/in/packed" "$LOG/stderr" || fail "--skip-nested: no warning names the dataset"
ok
# --allow-nested: its files are packed as samples, as asked
pk_ok --seed 1 --allow-nested -f -o "$T/again.ds" "$T/in"
keys "$T/again.ds" | grep -qx $'packed/index\tpacked' || fail "--allow-nested: the index is not a sample"
ok
pk --allow-nested --skip-nested -o "$T/again.ds" "$T/in"
expect_rc 2 "--allow-nested with --skip-nested"
# OUT inside the input, replaced with --force: never packed into itself
pk_ok --seed 2 -f -o "$T/in/packed" "$T/in"
expect_keys "$T/in/packed" "OUT replaced inside its input" $'cat/1.bin\tcat' $'dog/2.bin\tdog'
expect_out 'the output being replaced, inside an input \(1\)' "OUT replaced inside its input"
# an archive of a dataset: refused naming the member, or left out with --skip-nested
rm -rf "$T/in/packed"
pk_ok --seed 1 -o "$T/ds1" "$T/in"
(cd "$T" && tar -cf ds.tar ds1 in) || fail "tar failed"
pk --seed 1 -o "$T/fromtar.ds" "$T/ds.tar"
expect_rc 1 "an archive holding a dataset"
expect_stderr 'ds1/(index|segment-000000|tables|keys)' "an archive holding a dataset"
nothing_left "$T/fromtar.ds" "an archive holding a dataset"
pk_ok --seed 1 --skip-nested -o "$T/fromtar.ds" "$T/ds.tar"
expect_keys "$T/fromtar.ds" "--skip-nested (archive)" $'in/cat/1.bin\tin' $'in/dog/2.bin\tin'
expect_out 'hdmlp datasets \(directories, or archive members\) \(4\)' "--skip-nested (archive)"
expect_out '^Warning: 1 of 2 labels have no samples: ds1$' "--skip-nested (archive)"

# --help documents the choice
pk_ok --help
grep -q -- '--skip-nested' "$LOG/stdout" && grep -q -- '--allow-nested' "$LOG/stdout" ||
    fail "--help does not document --skip-nested and --allow-nested"
ok

finish
