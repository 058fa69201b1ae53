#!/bin/bash
# hdmlp-pack usage: --help, --version, usage errors (exit 2), --chunk-size 0.
source "$(dirname "$0")/lib.sh"

mkdir -p "$T/in/cls"
printf 'x' >"$T/in/cls/a"

pk --help
expect_rc 0 "--help"
grep -qi 'usage' "$LOG/stdout" "$LOG/stderr" || fail "--help prints no usage text"
grep -q -- '--chunk-size' "$LOG/stdout" "$LOG/stderr" || fail "--help does not mention --chunk-size"
ok

pk --version
expect_rc 0 "--version"
grep -qE '[0-9]+\.[0-9]+\.[0-9]+' "$LOG/stdout" || fail "--version prints no x.y.z on stdout"
ok

pk
expect_rc 2 "no arguments"
expect_stderr 'usage|input|-o' "no arguments"

pk --no-such-option -o "$T/out" "$T/in"
expect_rc 2 "unknown option"
expect_stderr 'no-such-option' "unknown option"
nothing_left "$T/out" "unknown option"

pk "$T/in"
expect_rc 2 "missing -o"
expect_stderr '-o|output' "missing -o"

pk -o "$T/out"
expect_rc 2 "no INPUT"
nothing_left "$T/out" "no INPUT"

pk --chunk-size 0 -o "$T/out" "$T/in"
expect_rc 2 "--chunk-size 0"
expect_stderr 'chunk.size' "--chunk-size 0"
nothing_left "$T/out" "--chunk-size 0"

pk --chunk-size abc -o "$T/out" "$T/in"
expect_rc 2 "--chunk-size abc"
nothing_left "$T/out" "--chunk-size abc"

pk --chunk-size 2097152 -o "$T/out" "$T/in"
expect_rc 2 "--chunk-size beyond 2^20"
nothing_left "$T/out" "--chunk-size 2^21"

pk --compress lz4 -o "$T/out" "$T/in"
expect_rc 2 "--compress lz4"
expect_stderr 'compress|lz4' "--compress lz4"
nothing_left "$T/out" "--compress lz4"

pk --threads 0 -o "$T/out" "$T/in"
expect_rc 2 "--threads 0"
nothing_left "$T/out" "--threads 0"

pk --chunk-size -o "$T/out" "$T/in"
expect_rc 2 "--chunk-size with a missing value"

# The smallest valid pack still works after all that.
pk_ok -o "$T/out" "$T/in"
verify_ok "$T/out" "one-sample pack"

finish
