#!/bin/bash
# Output disk full: pack ~3 MB (a tree, then a tar) into a 2 MB tmpfs -> non-zero exit, a "no space" message,
# no OUT and no .OUT.tmp-* left. Skipped (exit 77) where mounting a tmpfs is not allowed.
source "$(dirname "$0")/lib.sh"

mkdir -p "$T/in/a" "$T/in/b" "$T/mnt"
for i in 1 2 3 4 5 6; do
    head -c 500000 /dev/urandom >"$T/in/a/$i.bin"
    head -c 1000 /dev/urandom >"$T/in/b/$i.bin"
done

if ! mount -t tmpfs -o size=2m hdmlp-test "$T/mnt" 2>"$LOG/mount.err"; then
    echo "[$TEST_NAME] SKIP: cannot mount a tmpfs here ($(cat "$LOG/mount.err"))"
    rm -rf "$T"
    exit 77
fi
cleanup() { umount "$T/mnt" 2>/dev/null; }
trap cleanup EXIT

for args in "--compress none" "--compress none --segment-size 0 --chunk-size 1" "--compress zstd:1 --threads 2"; do
    # shellcheck disable=SC2086
    pk $args -o "$T/mnt/out" "$T/in"
    expect_fail "disk full ($args)"
    expect_stderr 'no space|ENOSPC|disk full' "disk full ($args)"
    nothing_left "$T/mnt/out" "disk full ($args)"
    [ -z "$(ls -A "$T/mnt")" ] || fail "disk full ($args): tmpfs not empty: $(ls -A "$T/mnt")"
    ok
done

# An archive input is spilled into the temporary directory first: that can fill the disk too.
tar -cf "$T/in.tar" -C "$T/in" .
pk --compress none -o "$T/mnt/out" "$T/in.tar"
expect_fail "disk full (tar input)"
expect_stderr 'no space|ENOSPC|disk full' "disk full (tar input)"
nothing_left "$T/mnt/out" "disk full (tar input)"
[ -z "$(ls -A "$T/mnt")" ] || fail "disk full (tar input): tmpfs not empty: $(ls -A "$T/mnt")"

# The same input fits once the space is there (remount larger): proves the failure was ENOSPC.
mount -o remount,size=16m "$T/mnt" || fail "could not remount the tmpfs larger"
pk_ok --quiet --compress none -o "$T/mnt/out" "$T/in"
verify_ok "$T/mnt/out" "after remount"

# --force over an existing dataset on a full disk: the old OUT survives.
mount -o remount,size=3500k "$T/mnt" || fail "could not shrink the tmpfs"
before=$(tree_hash "$T/mnt/out")
pk --force --compress none --seed 9 -o "$T/mnt/out" "$T/in"
expect_fail "--force on a full disk"
expect_stderr 'no space|ENOSPC|disk full' "--force on a full disk"
[ "$(tree_hash "$T/mnt/out")" = "$before" ] || fail "--force on a full disk damaged the old OUT"
no_temp_left "$T/mnt/out" "--force on a full disk"

umount "$T/mnt"
trap - EXIT
finish
