#!/bin/bash
# The streaming packer (issue 27): item metadata spilled to files and sorted on disk in runs
# of bounded size (HDMLP_PACK_SORT_RUN_BYTES sets the run size, for tests).
#   - More runs, same bytes: a pack whose items fill many runs (merged) is byte-identical
#     to the same pack sorted in one run: a directory of 5,000 samples (above 4,096, where
#     the packed order is the Feistel network), an archive with duplicate member names,
#     hard links (to the last earlier member of the name, and through another hard link)
#     and a symbolic link, and a list with a duplicate line, packed together, with and
#     without a dictionary.
#   - Scan order does not matter: a list and a tar whose lines / members come in another
#     order give the same dataset (keys unique).
#   - Disk full while writing sorted runs during the scan, or merging them (a 2 MB tmpfs):
#     the error names the run or bucket file and no space, nothing is left. Skipped where a
#     tmpfs cannot be mounted.
source "$(dirname "$0")/lib.sh"
export SOURCE_DATE_EPOCH=1700000000

"$PYTHON" - "$T" <<'PY' || fail "generating the inputs"
import io, os, sys, tarfile
t = sys.argv[1]
for i in range(5000):
    d = os.path.join(t, "in", "c%d" % (i % 7))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "s%05d.bin" % i), "wb") as f:
        f.write(b"sample %d " % i * (1 + i % 5))

def add(tf, name, data=None, link=None, sym=None):
    ti = tarfile.TarInfo(name)
    ti.mtime = 0
    if link is not None:
        ti.type, ti.linkname = tarfile.LNKTYPE, link
        tf.addfile(ti)
    elif sym is not None:
        ti.type, ti.linkname = tarfile.SYMTYPE, sym
        tf.addfile(ti)
    else:
        ti.size = len(data)
        tf.addfile(ti, io.BytesIO(data))

with tarfile.open(os.path.join(t, "dups.tar"), "w", format=tarfile.GNU_FORMAT) as tf:
    add(tf, "x/a", b"first a")
    add(tf, "y/b", b"b")
    add(tf, "x/h1", link="x/a")       # the first x/a
    add(tf, "x/a", b"second a")       # a duplicate name
    add(tf, "x/h2", link="x/a")       # the second x/a
    add(tf, "y/h3", link="x/h2")      # through a hard link
    add(tf, "y/s", sym="../x/h1")     # symbolic link to a hard link
    for i in range(300):
        add(tf, "z/m%03d" % (i % 150), b"member %d" % i)  # 150 duplicated names

lines = ["in/c%d/s%05d.bin\tl%d" % (i % 7, i, i % 3) for i in range(0, 5000, 9)]
lines.append(lines[0])  # a duplicate line
with open(os.path.join(t, "all.list"), "w") as f:
    f.write("\n".join(lines) + "\n")

# the same samples in another scan order: a list reversed, a tar of members shuffled
uniq = lines[:-1]
with open(os.path.join(t, "fwd.list"), "w") as f:
    f.write("\n".join(uniq) + "\n")
with open(os.path.join(t, "rev.list"), "w") as f:
    f.write("\n".join(reversed(uniq)) + "\n")
names = ["k/%04d" % i for i in range(2000)]
for out, order in (("fwd.tar", names), ("mix.tar", names[1::2] + names[0::2])):
    with tarfile.open(os.path.join(t, out), "w") as tf:
        for n in order:
            add(tf, n, ("content of %s" % n).encode())
PY

# ---- more runs, same bytes ------------------------------------------------------------------
for opts in "--compress none" "--compress zstd --dict --chunk-size 16 --threads 2"; do
    # shellcheck disable=SC2086
    pk_ok --quiet --seed 11 $opts -o "$T/one" "$T/in" "$T/dups.tar" --list "$T/all.list"
    # ~50 bytes of record and key per item: runs of about 40 items, ~180 of them
    # shellcheck disable=SC2086
    HDMLP_PACK_SORT_RUN_BYTES=2000 pk_ok --quiet --seed 11 $opts -o "$T/runs" "$T/in" \
        "$T/dups.tar" --list "$T/all.list"
    [ "$(tree_hash "$T/one")" = "$(tree_hash "$T/runs")" ] ||
        fail "$opts: the pack sorted in runs differs from the pack sorted in one"
    ok
    verify_ok "$T/runs" "$opts: runs"
    n=$(hdr "$T/runs" samples)
    [ "$n" = $((5000 + 7 + 300 + 557)) ] || fail "$opts: $n samples"
    ok
    rm -rf "$T/one" "$T/runs"
done
pk --quiet -o "$T/bad" "$T/in"
HDMLP_PACK_SORT_RUN_BYTES=0 pk --quiet -o "$T/bad" "$T/in"
expect_rc 2 "HDMLP_PACK_SORT_RUN_BYTES=0"
rm -rf "$T/bad"

# the hard links took the bytes of the right members
need_dsdump
HDMLP_PACK_SORT_RUN_BYTES=300 pk_ok --quiet --seed 3 --compress none -o "$T/links" "$T/dups.tar"
"$PACK" --extract "$T/links" x/h1 -o "$T/h1" >/dev/null 2>&1 || fail "extract x/h1"
"$PACK" --extract "$T/links" x/h2 -o "$T/h2" >/dev/null 2>&1 || fail "extract x/h2"
"$PACK" --extract "$T/links" y/h3 -o "$T/h3" >/dev/null 2>&1 || fail "extract y/h3"
"$PACK" --extract "$T/links" y/s -o "$T/s" >/dev/null 2>&1 || fail "extract y/s"
[ "$(cat "$T/h1")" = "first a" ] || fail "x/h1 holds '$(cat "$T/h1")', not the first x/a"
[ "$(cat "$T/h2")" = "second a" ] || fail "x/h2 holds '$(cat "$T/h2")', not the second x/a"
[ "$(cat "$T/h3")" = "second a" ] || fail "y/h3 holds '$(cat "$T/h3")', not x/h2's bytes"
[ "$(cat "$T/s")" = "first a" ] || fail "y/s holds '$(cat "$T/s")', not x/h1's bytes"
ok

# ---- scan order does not matter ------------------------------------------------------------
pk_ok --quiet --seed 4 -o "$T/fwd" --list "$T/fwd.list"
HDMLP_PACK_SORT_RUN_BYTES=1000 pk_ok --quiet --seed 4 -o "$T/rev" --list "$T/rev.list"
[ "$(tree_hash "$T/fwd")" = "$(tree_hash "$T/rev")" ] || fail "a list in another order packs differently"
ok
pk_ok --quiet --seed 4 -o "$T/tfwd" "$T/fwd.tar"
HDMLP_PACK_SORT_RUN_BYTES=1000 pk_ok --quiet --seed 4 -o "$T/tmix" "$T/mix.tar"
[ "$(tree_hash "$T/tfwd")" = "$(tree_hash "$T/tmix")" ] || fail "a tar in another order packs differently"
ok

# ---- disk full while writing runs or merging them --------------------------------------------
mkdir -p "$T/mnt"
if ! mount -t tmpfs -o size=2m hdmlp-test "$T/mnt" 2>"$LOG/mount.err"; then
    skip "cannot mount a tmpfs here ($(cat "$LOG/mount.err"))"
    finish
fi
cleanup() { umount "$T/mnt" 2>/dev/null; }
trap cleanup EXIT
# 40,000 items with 180-byte keys in runs of 64 KiB: the runs alone are ~8.8 MB
long=in/c0/$(printf './%.0s' $(seq 87))s00000.bin
yes "$long	l" | head -40000 >"$T/long.list"
HDMLP_PACK_SORT_RUN_BYTES=65536 pk --quiet --compress none -o "$T/mnt/out" --list "$T/long.list"
expect_fail "disk full while writing runs"
expect_stderr 'cannot write .*(items|keys)\.run: no space' "disk full while writing runs"
nothing_left "$T/mnt/out" "disk full while writing runs"
[ -z "$(ls -A "$T/mnt")" ] || fail "disk full while writing runs: tmpfs not empty: $(ls -A "$T/mnt")"
# 6,000 items (~1.3 MB of runs): the runs fit, the buckets of packed positions beside
# them do not
head -6000 "$T/long.list" >"$T/mid.list"
HDMLP_PACK_SORT_RUN_BYTES=65536 pk --quiet --compress none -o "$T/mnt/out" --list "$T/mid.list"
expect_fail "disk full while merging"
expect_stderr 'cannot write .*(items|keys)\.packed: no space' "disk full while merging"
nothing_left "$T/mnt/out" "disk full while merging"
[ -z "$(ls -A "$T/mnt")" ] || fail "disk full while merging: tmpfs not empty: $(ls -A "$T/mnt")"
umount "$T/mnt"
trap - EXIT
finish
