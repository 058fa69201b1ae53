#!/bin/bash
# A rank killed mid-epoch: 3 peer-list processes (--peer-timeout 1000, --compute-ms slows
# every rank so the kill lands mid-epoch); once the victim has run for a while, SIGKILL.
# The survivors must exit 1 (never 0, never hang) within a few timeouts, with a message
# naming HDMLP_E_PEER and the dead rank. Done for the victim being rank 2 and rank 0.
source "$(dirname "$0")/dist_lib.sh"

make_synthetic "$T/syn" 3000 16 4
TIMEOUT_MS=1000
LIMIT_MS=10000 # survivors must be done this long after the kill (10 timeouts)

# kill_run VICTIM
kill_run() {
    local victim=$1 ports list r pids=() t_kill ms rc
    ports=$(free_ports 3)
    list=$(echo "$ports" | awk '{ printf "127.0.0.1:%s,127.0.0.1:%s,127.0.0.1:%s", $1, $2, $3 }')
    for r in 0 1 2; do
        # 1000 samples per rank and epoch = 63 batches of 16 x 30 ms: ~2 s per epoch.
        timeout -k 5 120 "$BENCH" "$T/syn" --peers "$list" --rank $r --memory 25% --epochs 3 \
            --seed 6 --batch 16 --compute-ms 30 --peer-timeout $TIMEOUT_MS --quiet \
            >"$T/k$victim.$r.out" 2>"$T/k$victim.$r.err" &
        pids+=($!)
    done
    sleep 1.5
    kill -0 "${pids[$victim]}" 2>/dev/null || fail "victim rank $victim ended before the kill"
    # timeout(1) runs hdmlp-bench as its child: kill that process itself.
    local child
    child=$(pgrep -P "${pids[$victim]}" | head -1)
    [ -n "$child" ] || fail "cannot find rank $victim's hdmlp-bench process"
    kill -KILL "$child"
    t_kill=$(date +%s%N)
    for r in 0 1 2; do
        [ $r = "$victim" ] && { wait "${pids[$r]}" 2>/dev/null; continue; }
        wait "${pids[$r]}"
        rc=$?
        ms=$((($(date +%s%N) - t_kill) / 1000000))
        LAST_ERR=$T/k$victim.$r.err
        LAST_CMD="rank $r after rank $victim was killed"
        [ $rc != 0 ] || fail "rank $r exited 0 after rank $victim was killed mid-epoch"
        [ $rc != 124 ] && [ $rc != 137 ] || fail "rank $r hung after rank $victim was killed"
        [ $rc = 1 ] || fail "rank $r exited $rc, expected 1"
        grep -q 'HDMLP_E_PEER' "$T/k$victim.$r.err" || fail "rank $r's message does not name HDMLP_E_PEER"
        # It names the victim, or (a cascade) the survivor it was waiting on, which stopped
        # serving when it failed on the victim itself: that one's message names the victim.
        if ! grep -q "rank $victim" "$T/k$victim.$r.err"; then
            local other=$((3 - r - victim))
            grep -q "rank $other" "$T/k$victim.$r.err" && wait_named "$T/k$victim.$other.err" "$victim" ||
                fail "rank $r's message names neither rank $victim nor a survivor that failed on it"
        fi
        [ $ms -le $LIMIT_MS ] || fail "rank $r took $ms ms after the kill (limit $LIMIT_MS)"
        note "victim $victim: rank $r exited $rc after $ms ms: $(head -1 "$T/k$victim.$r.err")"
        ok
    done
}

# wait_named FILE RANK: true once FILE (a survivor's stderr) names RANK (it may still be
# writing when the other survivor's check runs), within 10 s.
wait_named() {
    for _ in $(seq 50); do
        grep -q "rank $2" "$1" 2>/dev/null && return 0
        sleep 0.2
    done
    return 1
}

kill_run 2
kill_run 0
finish
