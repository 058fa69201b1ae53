#!/bin/bash
# Bad input: each case must fail with a clear "hdmlp-pack: " message naming the culprit,
# a non-zero exit and nothing left behind (no OUT, no .OUT.tmp-*). Also: OUT exists
# without --force (untouched) and --force (replaced), empty files, non-UTF-8 names.
source "$(dirname "$0")/lib.sh"
need_dsdump

mk() { mkdir -p "$(dirname "$1")" && printf '%s' "${2:-data of $1}" >"$1"; }

# --- a good base tree --------------------------------------------------------------------
mk "$T/good/cat/1.bin"
mk "$T/good/cat/2.bin"
mk "$T/good/dog/3.bin"
O=$T/out

# --- missing input -----------------------------------------------------------------------
pk -o "$O" "$T/does-not-exist"
expect_fail "missing input"
expect_stderr_fixed "$T/does-not-exist" "missing input"
expect_stderr 'no such file|not found|does not exist' "missing input"
nothing_left "$O" "missing input"

pk -o "$O" "$T/good" "$T/does-not-exist"
expect_fail "good + missing input"
expect_stderr_fixed "does-not-exist" "good + missing input"
nothing_left "$O" "good + missing input"

# --- empty inputs ------------------------------------------------------------------------
mkdir -p "$T/empty"
pk -o "$O" "$T/empty"
expect_fail "empty directory"
expect_stderr 'empty|no samples|no (input )?files|nothing' "empty directory"
nothing_left "$O" "empty directory"

mkdir -p "$T/emptycls/a" "$T/emptycls/b"
pk -o "$O" "$T/emptycls"
expect_fail "directory of empty class dirs"
nothing_left "$O" "empty class dirs"

: >"$T/empty.list"
pk -o "$O" --list "$T/empty.list"
expect_fail "empty --list file"
nothing_left "$O" "empty --list"

# --- unreadable inputs (we run as root, so chmod 000 alone does not stop reads) ----------
# a) a --list entry that is a directory
printf '%s\tcat\n%s\tdog\n' "$T/good/cat/1.bin" "$T/good/dog" >"$T/dir.list"
pk -o "$O" --list "$T/dir.list"
expect_fail "--list entry is a directory"
expect_stderr_fixed "$T/good/dog" "--list entry is a directory"
nothing_left "$O" "--list entry is a directory"

# b) a --list entry that does not exist, and a malformed line
printf '%s\tcat\n%s\tcat\n' "$T/good/cat/1.bin" "$T/good/cat/nope.bin" >"$T/missing.list"
pk -o "$O" --list "$T/missing.list"
expect_fail "--list entry missing"
expect_stderr_fixed "nope.bin" "--list entry missing"
nothing_left "$O" "--list entry missing"
printf '%s\n' "$T/good/cat/1.bin" >"$T/notab.list"
pk -o "$O" --list "$T/notab.list"
expect_fail "--list line without a TAB"
expect_stderr 'line 1|:1[: ]|tab|label' "--list line without a TAB"
nothing_left "$O" "--list line without a TAB"

# c) a FIFO among the samples: must not hang; either an error naming it or a warning
#    naming it and the FIFO not packed.
cp -r "$T/good" "$T/fifo"
mkfifo "$T/fifo/cat/pipe.bin"
pk -o "$O" "$T/fifo"
grep -q 'pipe.bin' "$LOG/stderr" || fail "FIFO in a class dir: stderr does not name pipe.bin"
if [ "$RC" = 0 ]; then
    dump "$O" | cut -f3 | grep -q 'pipe' && fail "FIFO was packed as a sample"
    note "FIFO: skipped with a warning (exit 0)"
    rm -rf "$O"
else
    nothing_left "$O" "FIFO in a class dir"
fi
ok
printf '%s\tcat\n' "$T/fifo/cat/pipe.bin" >"$T/fifo.list"
pk -o "$O" --list "$T/fifo.list"
expect_fail "--list entry is a FIFO"
expect_stderr_fixed "pipe.bin" "--list entry is a FIFO"
nothing_left "$O" "--list entry is a FIFO"

# d) chmod 000 for real: run hdmlp-pack as an unprivileged user (setpriv) when we are root.
cp -r "$T/good" "$T/noperm"
chmod 000 "$T/noperm/cat/2.bin"
mkdir -p "$T/nobody"
chmod 0777 "$T/nobody"
chmod 0755 "$T"
if [ "$(id -u)" != 0 ]; then
    pk -o "$T/nobody/out" "$T/noperm"
    RUNAS=self
elif command -v setpriv >/dev/null &&
    setpriv --reuid=65534 --regid=65534 --clear-groups "$PACK" --version >/dev/null 2>&1; then
    LAST_CMD="(as nobody) hdmlp-pack -o nobody/out noperm"
    timeout 60 setpriv --reuid=65534 --regid=65534 --clear-groups \
        "$PACK" -o "$T/nobody/out" "$T/noperm" >"$LOG/stdout" 2>"$LOG/stderr"
    RC=$?
    RUNAS=nobody
else
    RUNAS=
    skip "chmod 000: cannot run hdmlp-pack unprivileged here (no setpriv or no access to the binary)"
fi
if [ -n "$RUNAS" ]; then
    expect_fail "unreadable file (chmod 000, as $RUNAS)"
    expect_stderr_fixed "2.bin" "unreadable file"
    expect_stderr 'permission|denied|access' "unreadable file"
    nothing_left "$T/nobody/out" "unreadable file"
fi
chmod 0644 "$T/noperm/cat/2.bin"

# --- symlink loops -----------------------------------------------------------------------
# cat/loop -> . : either an error naming it, or (packer design: symlinks to directories
# are not followed) a warning naming it; never a hang or an endless walk.
cp -r "$T/good" "$T/loop1"
ln -s . "$T/loop1/cat/loop"
pk -o "$O" "$T/loop1"
grep -q 'cat/loop' "$LOG/stderr" || fail "symlink loop (cat/loop -> .): stderr does not name cat/loop"
if [ "$RC" = 0 ]; then
    [ "$(hdr "$O" samples)" = 3 ] || fail "symlink loop (cat/loop -> .): followed (samples: $(hdr "$O" samples))"
    note "cat/loop -> . : not followed, warning: $(grep 'cat/loop' "$LOG/stderr" | head -1)"
    rm -rf "$O"
else
    nothing_left "$O" "symlink loop (cat/loop -> .)"
fi
ok

cp -r "$T/good" "$T/loop2"
ln -s b "$T/loop2/cat/a"
ln -s a "$T/loop2/cat/b"
pk -o "$O" "$T/loop2"
expect_fail "symlink loop a -> b -> a"
grep -qE 'cat/a|cat/b' "$LOG/stderr" || fail "symlink loop a -> b -> a: stderr names neither a nor b"
expect_stderr 'loop|symbolic|levels' "symlink loop a -> b -> a"
nothing_left "$O" "symlink loop a -> b -> a"

# A symlink to a regular file is an ordinary sample (not an error).
cp -r "$T/good" "$T/link"
ln -s ../dog/3.bin "$T/link/cat/linked.bin"
pk -o "$O" "$T/link"
if [ "$RC" = 0 ]; then
    dump "$O" | cut -f3 | grep -qx 'cat/linked.bin' || note "(symlinked file not packed)"
    rm -rf "$O"
else
    note "(a symlink to a regular file is rejected: $(head -1 "$LOG/stderr"))"
fi

# --- OUT exists ----------------------------------------------------------------------------
pk_ok --quiet --seed 1 -o "$O" "$T/good"
before=$(tree_hash "$O")
pk --seed 2 -o "$O" "$T/good"
expect_fail "OUT exists without --force"
expect_stderr 'exist|--force' "OUT exists without --force"
expect_stderr_fixed "$O" "OUT exists without --force"
[ "$(tree_hash "$O")" = "$before" ] || fail "OUT exists without --force: OUT was modified"
no_temp_left "$O" "OUT exists without --force"

: >"$T/afile"
pk -o "$T/afile" "$T/good"
expect_fail "OUT is an existing regular file"
[ -f "$T/afile" ] && [ ! -s "$T/afile" ] || fail "OUT regular file was modified"
ok

pk --force --quiet --seed 2 -o "$O" "$T/good"
expect_rc 0 "--force over an existing dataset"
verify_ok "$O" "--force"
[ "$(hdr "$O" seed)" = 2 ] || fail "--force: OUT still holds the old dataset"
ls -A "$T" | grep -E '^\.out' && fail "--force left something beside OUT"
ok

# --force never removes a directory that is not a dataset
mkdir -p "$T/notds"
printf 'precious' >"$T/notds/notes.txt"
pk --force -o "$T/notds" "$T/good"
expect_fail "--force over a directory that is not a dataset"
[ "$(cat "$T/notds/notes.txt")" = precious ] || fail "--force destroyed a non-dataset directory"
no_temp_left "$T/notds" "--force over a non-dataset directory"

# --force with a failing input keeps the old OUT
before=$(tree_hash "$O")
pk --force -o "$O" "$T/does-not-exist"
expect_fail "--force with a missing input"
[ "$(tree_hash "$O")" = "$before" ] || fail "--force with a failing input destroyed the old OUT"
no_temp_left "$O" "--force with a failing input"
rm -rf "$O"

# --- interrupted (SIGINT / SIGTERM mid-pack): non-zero, nothing left ------------------------
# 1,500 one-chunk segment files are each fsynced, so the pack lasts a few seconds.
mkdir -p "$T/many/c"
for i in $(seq 1500); do printf '%s' "$i" >"$T/many/c/$i"; done
for sig in INT TERM; do
    LAST_CMD="hdmlp-pack --chunk-size 1 --segment-size 0 -o $O many (SIG$sig after 0.5 s)"
    timeout -k 5 60 "$PACK" --quiet --chunk-size 1 --segment-size 0 -o "$O" "$T/many" \
        >"$LOG/stdout" 2>"$LOG/stderr" &
    pid=$!
    sleep 0.5
    kill -s "$sig" "$pid" 2>/dev/null
    wait "$pid"
    RC=$?
    if [ "$RC" = 0 ] && [ -d "$O" ]; then
        note "SIG$sig: the pack finished before the signal arrived (inconclusive)"
        rm -rf "$O"
        continue
    fi
    expect_fail "SIG$sig mid-pack"
    expect_stderr 'interrupt|signal|cancel' "SIG$sig mid-pack"
    nothing_left "$O" "SIG$sig mid-pack"
done

# --- empty files are valid samples ---------------------------------------------------------
mkdir -p "$T/zero/cls"
: >"$T/zero/cls/empty.bin"
mk "$T/zero/cls/full.bin" "hello"
pk_ok --quiet --compress zstd:1 -o "$O" "$T/zero"
verify_ok "$O" "zero-byte sample"
"$DSDUMP" --root "$T/zero" "$O" >/dev/null 2>"$T/dump.err" || fail "zero-byte sample: $(cat "$T/dump.err")"
pk_ok --extract "$O" cls/empty.bin -o "$T/e.bin"
[ -f "$T/e.bin" ] && [ ! -s "$T/e.bin" ] || fail "--extract of a 0-byte sample is not an empty file"
rm -rf "$O"

# --- non-UTF-8 names, files in the root (label ".") ----------------------------------------
NU=$T/nonutf8
mkdir -p "$NU/cls" "$NU/cl"$'\xe0'"ss"
printf 'ff fe bytes' >"$NU/cls/"$'\xff\xfe.png'
printf 'latin1 e-acute' >"$NU/cls/caf"$'\xe9.png'
printf 'in a latin1 class dir' >"$NU/cl"$'\xe0'"ss/x.bin"
printf 'a tab and a newline' >"$NU/cls/"$'t\tab\nnl.bin'
printf 'at the root' >"$NU/root.bin"
pk_ok --quiet -o "$O" "$NU"
verify_ok "$O" "non-UTF-8 names"
"$DSDUMP" --root "$NU" "$O" >"$T/nu.txt" 2>"$T/dump.err" ||
    fail "non-UTF-8 names: bytes differ: $(cat "$T/dump.err")"
export LC_ALL=C
for key in "cls/"$'\xff\xfe.png' "cls/caf"$'\xe9.png' "cl"$'\xe0'"ss/x.bin" "root.bin"; do
    line=$(grep -v '^#' "$T/nu.txt" | awk -F'\t' -v k="$key" '$3 == k')
    [ -n "$line" ] || fail "non-UTF-8 names: key '$key' not stored verbatim"
    idx=${line%%$'\t'*}
    pk --extract "$O" "$idx" -o "$T/nu.bin"
    [ "$RC" = 0 ] || fail "non-UTF-8 names: --extract index $idx failed"
    cmp -s "$T/nu.bin" "$NU/$key" || fail "non-UTF-8 names: index $idx bytes differ"
    pk --extract "$O" "$key" -o "$T/nu2.bin"
    [ "$RC" = 0 ] || fail "non-UTF-8 names: --extract by byte key failed"
    cmp -s "$T/nu2.bin" "$NU/$key" || fail "non-UTF-8 names: key bytes differ"
done
grep -v '^#' "$T/nu.txt" | awk -F'\t' '$3 == "cls/t\\x09ab\\x0anl.bin"' | grep -q . ||
    fail "key with TAB and newline not stored verbatim"
grep -v '^#' "$T/nu.txt" | awk -F'\t' '$3 == "root.bin" && $2 != "." { exit 1 }' ||
    fail "a file in the input root does not get label '.'"
grep '^# label' "$T/nu.txt" | cut -f3 | grep -qx "cl"$'\xe0'"ss" || fail "non-UTF-8 label name not verbatim"
unset LC_ALL
ok

finish
