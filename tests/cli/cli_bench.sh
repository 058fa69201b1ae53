#!/bin/bash
# hdmlp-bench arguments: usage errors exit 2 naming the option, runtime errors exit 1 naming
# the problem, --ssd-capacity 0 turns the SSD tier off (as in the API), --plan's JSON keys
# are a run's. Needs HDMLP_BENCH (default: hdmlp-bench in the build tree beside PACK).
source "$(dirname "$0")/lib.sh"

BENCH=${HDMLP_BENCH:-$(dirname "$PACK")/../loader/hdmlp-bench}
[ -x "$BENCH" ] || fail "no hdmlp-bench at $BENCH (set HDMLP_BENCH)"

# bk ARGS...: runs hdmlp-bench; RC, $LOG/stdout, $LOG/stderr.
bk() {
    LAST_CMD="hdmlp-bench $*"
    timeout -k 5 60 "$BENCH" "$@" >"$LOG/stdout" 2>"$LOG/stderr"
    RC=$?
    [ "$RC" != 124 ] && [ "$RC" != 137 ] || fail "timed out (hung?): $LAST_CMD"
}
# usage ERE ARGS...: exit 2 and an "hdmlp-bench: " line matching ERE.
usage() {
    local re=$1
    shift
    bk "$@"
    expect_rc 2 "$*"
    grep -qiE -- "$re" "$LOG/stderr" || fail "$*: stderr does not match /$re/"
    grep -q '^hdmlp-bench: ' "$LOG/stderr" || fail "$*: no line starts with 'hdmlp-bench: '"
    ok
}
json_field() { "$PYTHON" -c 'import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])[sys.argv[1]])' "$1" <"$LOG/stdout"; }

mkdir -p "$T/in/a" "$T/in/b"
for i in $(seq 1 300); do head -c $((100 + i * 7)) /dev/urandom >"$T/in/$([ $((i % 2)) = 0 ] && echo a || echo b)/$i"; done
pk_ok --quiet --chunk-size 8 -o "$T/ds" "$T/in"
DS=$T/ds

usage 'memory' "$DS"
usage "invalid size 'abc'" "$DS" --memory abc
usage 'invalid size' "$DS" --memory 1e30%
usage 'ram-cache.*25%' "$DS" --memory 50% --ram-cache 25%
usage 'go together' "$DS" --memory 50% --ssd-cache "$T/ssd"
usage 'go together' "$DS" --memory 50% --ssd-capacity 1M
usage 'invalid size' "$DS" --memory 50% --ssd-cache "$T/ssd" --ssd-capacity 10%
usage 'epochs' "$DS" --memory 50% --epochs 0
usage 'no-such' "$DS" --memory 50% --no-such-option

bk "$T/missing" --memory 1M
expect_rc 1 "missing dataset"
grep -qF "$T/missing" "$LOG/stderr" || fail "missing dataset: the path is not named"
ok

# Capacity 0: no SSD tier, nothing written, the run is a plain one.
bk "$DS" --memory 200% --batch 4 --epochs 2 --ssd-cache "$T/ssd0" --ssd-capacity 0 --json --quiet
expect_rc 0 "--ssd-capacity 0"
[ "$(json_field ssd_staged_chunks)" = 0 ] || fail "--ssd-capacity 0 staged chunks"
[ -z "$(ls -A "$T/ssd0" 2>/dev/null)" ] || fail "--ssd-capacity 0 wrote into the cache directory"
ok

# With a capacity the tier fills, and --plan --json forecasts the same loads and bytes (a
# fixed cost model: with learning, bytes follow the live estimate).
bk "$DS" --memory 80% --batch 4 --threads 1 --epochs 2 --ram-cache 0 --ssd-cache "$T/ssd" --ssd-capacity 1G --no-cost-learning --json --quiet
expect_rc 0 "--ssd-capacity 1G"
[ "$(json_field ssd_staged_chunks)" -gt 0 ] || fail "no chunk staged with --ssd-capacity 1G"
run_loads=$(json_field chunk_loads)
run_read=$(json_field bytes_read)
ok
rm -rf "$T/ssd"
bk "$DS" --memory 80% --batch 4 --threads 1 --epochs 2 --ram-cache 0 --ssd-cache "$T/ssd" --ssd-capacity 1G --no-cost-learning --plan --json --quiet
expect_rc 0 "--plan"
[ "$(json_field chunk_loads)" = "$run_loads" ] || fail "--plan chunk_loads $(json_field chunk_loads) vs run $run_loads"
[ "$(json_field bytes_read)" = "$run_read" ] || fail "--plan bytes_read $(json_field bytes_read) vs run $run_read"
ok

finish
