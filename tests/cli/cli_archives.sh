#!/bin/bash
# Archive inputs: tar, tar.gz, tar.zst and zip, detected by content (odd file names);
# each regular member is a sample labelled by its top directory, and so is a symlink member
# naming one (with its bytes). Members with absolute or "../" names are stored with their
# names verbatim as keys and nothing is written outside OUT.
source "$(dirname "$0")/lib.sh"
need_dsdump

EVIL=/tmp/hdmlp-cli-abs-$$
[ ! -e "$EVIL" ] || fail "$EVIL exists already"

"$PYTHON" - "$T" "$EVIL" <<'EOF' || fail "could not build the test archives"
import io, os, sys, tarfile, zipfile
t, evil = sys.argv[1], sys.argv[2]
members = [("cat/a.bin", b"A" * 100), ("cat/b.bin", b"B" * 5000 + bytes(range(256))),
           ("dog/c.bin", bytes(range(256)) * 40), ("dog/sub/d.bin", b"deep"),
           ("root.bin", b"no directory")]
def tar(path, mems, mode="w", dirs=True):
    with tarfile.open(path, mode, format=tarfile.GNU_FORMAT) as tf:
        if dirs:  # directory members are not samples
            for d in ("cat", "dog"):
                ti = tarfile.TarInfo(d); ti.type = tarfile.DIRTYPE; ti.mode = 0o755
                tf.addfile(ti)
        for name, data in mems:
            ti = tarfile.TarInfo(name); ti.size = len(data); ti.mtime = 1
            tf.addfile(ti, io.BytesIO(data))
        ti = tarfile.TarInfo("cat/link.bin"); ti.type = tarfile.SYMTYPE; ti.linkname = "a.bin"
        tf.addfile(ti)  # a sample with the bytes of cat/a.bin
os.makedirs(t + "/ref", exist_ok=True)
tar(t + "/plain.weird", members)
tar(t + "/gz.weird", members, "w:gz")
with zipfile.ZipFile(t + "/z.weird", "w", zipfile.ZIP_DEFLATED) as z:
    z.writestr("cat/", b"")
    for name, data in members:
        z.writestr(name, data)
for name, data in members + [("cat/link.bin", members[0][1])]:
    os.makedirs(os.path.dirname(t + "/ref/" + name), exist_ok=True)
    open(t + "/ref/" + name, "wb").write(data)
# hostile member names
bad = [("good/x.bin", b"good"), (evil + "/evil.bin", b"absolute"), ("../escape.bin", b"dotdot"),
       ("good/../../up.bin", b"updotdot")]
tar(t + "/evil.tar", bad, dirs=False)
with zipfile.ZipFile(t + "/evil.zip", "w") as z:
    for name, data in bad:
        z.writestr(zipfile.ZipInfo(name), data)
with open(t + "/evil.keys", "wb") as f:
    for name, data in bad:
        f.write(name.encode() + b"\t" + data + b"\n")
EOF

# check_archive DS WHAT [LINK]: the 5 regular members (and with LINK the symlink member
# cat/link.bin -> a.bin), verbatim keys, labels, bytes
check_archive() {
    local ds=$1 what=$2 link=${3:-}
    verify_ok "$ds" "$what"
    "$DSDUMP" --root "$T/ref" "$ds" >"$T/dump.txt" 2>"$T/dump.err" ||
        { cat "$T/dump.err" >&2; fail "$what: member bytes differ"; }
    grep -v '^#' "$T/dump.txt" | awk -F'\t' '{ print $3 "\t" $2 }' | LC_ALL=C sort >"$T/got"
    { printf 'cat/a.bin\tcat\ncat/b.bin\tcat\ndog/c.bin\tdog\ndog/sub/d.bin\tdog\nroot.bin\t.\n'
      [ -z "$link" ] || printf 'cat/link.bin\tcat\n'; } | LC_ALL=C sort >"$T/want"
    cmp -s "$T/got" "$T/want" || fail "$what: (key, label) pairs: $(tr '\t\n' '= ' <"$T/got")"
    ok
}

pk_ok --quiet -o "$T/plain.ds" "$T/plain.weird"
check_archive "$T/plain.ds" "tar" link
pk_ok --quiet -o "$T/gz.ds" "$T/gz.weird"
check_archive "$T/gz.ds" "tar.gz" link
pk_ok --quiet -o "$T/z.ds" "$T/z.weird"
check_archive "$T/z.ds" "zip"
if command -v zstd >/dev/null; then
    zstd -q -1 -c "$T/plain.weird" >"$T/zst.weird"
    pk_ok --quiet -o "$T/zst.ds" "$T/zst.weird"
    check_archive "$T/zst.ds" "tar.zst" link
else
    skip "tar.zst: zstd program not installed"
fi

# A file that is no archive (and not a directory) is an error naming it.
head -c 1000 /dev/urandom >"$T/noise.bin"
pk -o "$T/noise.ds" "$T/noise.bin"
expect_fail "random bytes as INPUT"
expect_stderr_fixed "noise.bin" "random bytes as INPUT"
nothing_left "$T/noise.ds" "random bytes as INPUT"

# Truncated archives (inside a member's data): error naming the file, nothing left
gzsize=$(stat -c %s "$T/gz.weird")
head -c $((gzsize / 2)) "$T/gz.weird" >"$T/trunc.tgz"
head -c 6000 "$T/plain.weird" >"$T/trunc.tar"
head -c $(($(stat -c %s "$T/z.weird") / 2)) "$T/z.weird" >"$T/trunc.zip"
for f in trunc.tgz trunc.tar trunc.zip; do
    pk -o "$T/trunc.ds" "$T/$f"
    expect_fail "truncated archive $f"
    expect_stderr_fixed "$f" "truncated archive $f"
    nothing_left "$T/trunc.ds" "truncated archive $f"
done

# Hostile member names: stored verbatim, nothing written outside OUT
for kind in tar zip; do
    mkdir -p "$T/cwd-$kind/sub"
    listing() { (cd "$T" && find . \( -path ./log -o -path "./evil-$kind.ds" \) -prune -o -print |
        LC_ALL=C sort | sha256sum); }
    before=$(listing)
    (cd "$T/cwd-$kind/sub" && timeout 60 "$PACK" --quiet -o "$T/evil-$kind.ds" "$T/evil.$kind" \
        >"$LOG/stdout" 2>"$LOG/stderr")
    RC=$?
    LAST_CMD="hdmlp-pack -o evil-$kind.ds evil.$kind"
    [ ! -e "$EVIL" ] || { rm -rf "$EVIL"; fail "$kind with absolute member names wrote $EVIL"; }
    [ "$RC" = 0 ] ||
        fail "$kind with absolute/../ member names: exit $RC (keys are opaque names; expected success)"
    [ "$(listing)" = "$before" ] || fail "$kind with hostile names: files appeared outside OUT"
    verify_ok "$T/evil-$kind.ds" "$kind with hostile names"
    dump "$T/evil-$kind.ds" >"$T/evil.txt"
    while IFS=$'\t' read -r key content; do
        line=$(awk -F'\t' -v k="$key" '$3 == k' "$T/evil.txt")
        [ -n "$line" ] || fail "$kind: member '$key' not stored verbatim as a key (keys: $(cut -f3 "$T/evil.txt" | tr '\n' ' '))"
        idx=${line%%$'\t'*}
        (cd "$T/cwd-$kind/sub" && "$PACK" --extract "$T/evil-$kind.ds" "$idx" -o "$T/e.bin") ||
            fail "$kind: --extract index $idx failed"
        [ "$(cat "$T/e.bin")" = "$content" ] || fail "$kind: '$key' content differs"
        (cd "$T/cwd-$kind/sub" && "$PACK" --extract "$T/evil-$kind.ds" "$key" >"$T/e2.bin") ||
            fail "$kind: --extract by key '$key' to stdout failed"
        [ "$(cat "$T/e2.bin")" = "$content" ] || fail "$kind: '$key' content differs (by key)"
    done <"$T/evil.keys"
    [ ! -e "$EVIL" ] && [ ! -e "$T/cwd-$kind/escape.bin" ] && [ ! -e "$T/cwd-$kind/up.bin" ] ||
        fail "$kind: --extract wrote to the key's path"
    ok
done

finish
