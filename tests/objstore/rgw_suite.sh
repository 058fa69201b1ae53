#!/usr/bin/env bash
# The object-storage suite (test_objstore_remote) against two S3 servers in turn: the
# project's tests/objstore/objstore_server.py (strict SigV4, every request cross-checked
# with botocore's signer) and Ceph's radosgw, a one-node cluster on 127.0.0.1 started by
# .ci/radosgw.sh (installed with apt-get when missing). Fails, saying why, when either
# server cannot start: radosgw is part of the suite, not optional. Every daemon is stopped
# by pid on exit.
#
# Usage: rgw_suite.sh SUITE_BINARY HDMLP_PACK PYTHON TMPDIR   (ctest: test_objstore_rgw)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
suite=$1 pack=$2 py=$3 tmp=$4
mkdir -p "$tmp"
run=$(mktemp -d "$tmp/rgw-suite.XXXXXX")
py_pid=""
cleanup() {
    if [ -n "$py_pid" ]; then
        kill "$py_pid" 2>/dev/null || true
        wait "$py_pid" 2>/dev/null || true
    fi
    bash "$root/.ci/radosgw.sh" stop "$run/rgw" || true
    rm -rf "$run"
}
trap cleanup EXIT
trap 'exit 143' TERM INT HUP
# Should this script be killed outright (ctest's timeout), a watchdog stops the daemons.
suite_pid=$$
(
    trap '' TERM INT HUP
    while kill -0 "$suite_pid" 2>/dev/null; do sleep 2; done
    bash "$root/.ci/radosgw.sh" stop "$run/rgw" >/dev/null 2>&1 || true
    rm -rf "$run"
) </dev/null >/dev/null 2>&1 &

# Debian's awscli: a pyenv `aws` earlier on PATH may be another version or none.
aws=/usr/bin/aws
if [ ! -x "$aws" ] || ! "$py" -c 'import botocore' 2>/dev/null; then
    bash "$root/.ci/radosgw.sh" install
fi
[ -x "$aws" ] || { echo "rgw_suite: /usr/bin/aws (Debian awscli) missing" >&2; exit 1; }

elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

export HDMLP_PACK=$pack HDMLP_AWS=$aws HDMLP_PY=$py HDMLP_S3_TOOL=$here/s3_tool.py
t_all=$(date +%s.%N)

run_suite() { # NAME: runs the Criterion suite against the server in HDMLP_S3_*
    local t0 rc=0
    t0=$(date +%s.%N)
    echo "==== object-storage suite against $1 ($HDMLP_S3_ENDPOINT)"
    "$suite" --jobs=2 || rc=$?
    echo "==== $1: $(elapsed "$t0") s"
    return $rc
}

# ---- the project's server ------------------------------------------------------------
mkdir -p "$run/py/hdmlp"
extra=()
if "$py" -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 80))" 2>/dev/null; then
    extra=(--also-port 80)
    export HDMLP_S3_PORT80=1
else
    export HDMLP_S3_PORT80=0
fi
coproc PYSRV { exec "$py" "$here/objstore_server.py" --root "$run/py" --s3 --botocore-check \
    --dns-name localhost "${extra[@]}" 2>"$run/py.log"; }
py_pid=$PYSRV_PID
read -r -t 20 word port <&"${PYSRV[0]}" || true
[ "${word:-}" = PORT ] || { cat "$run/py.log" >&2; echo "rgw_suite: objstore_server.py did not start" >&2; exit 1; }
export HDMLP_S3_SERVER=objstore_server.py HDMLP_S3_ENDPOINT=http://127.0.0.1:$port \
    HDMLP_S3_VHOST_ENDPOINT=http://localhost:$port HDMLP_S3_ACCESS_KEY=hdmlptestkey \
    HDMLP_S3_SECRET_KEY=hdmlp/test/secret HDMLP_S3_BUCKET=hdmlp
rc=0
if ! run_suite objstore_server.py; then
    rc=1
    echo "---- objstore_server.py's stderr:" >&2
    tail -n 40 "$run/py.log" >&2
fi
stats=$("$py" -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:$port/_stats').read().decode())")
kill "$py_pid" && wait "$py_pid" 2>/dev/null || true
py_pid=""
checked=$("$py" -c "import json,sys; print(json.loads(sys.argv[1]).get('botocore_checked', 0))" "$stats")
mismatch=$("$py" -c "import json,sys; print(json.loads(sys.argv[1]).get('botocore_mismatch', 0))" "$stats")
echo "==== botocore cross-check: $checked signed requests, $mismatch signed otherwise"
if [ "$mismatch" != 0 ] || [ "$checked" -lt 100 ]; then
    cat "$run/py.log" >&2
    echo "rgw_suite: hdmlp signed $mismatch of $checked requests otherwise than botocore" >&2
    rc=1
fi

# ---- radosgw ----------------------------------------------------------------------------
t0=$(date +%s.%N)
# A second try on new ports: a port picked free can be taken by a parallel test first.
if ! bash "$root/.ci/radosgw.sh" start "$run/rgw" >"$run/rgw.env"; then
    bash "$root/.ci/radosgw.sh" stop "$run/rgw" || true
    echo "rgw_suite: radosgw did not start; trying once more on other ports" >&2
    if ! bash "$root/.ci/radosgw.sh" start "$run/rgw" >"$run/rgw.env"; then
        echo "rgw_suite: FAIL: radosgw could not start (see above); it is part of the suite" >&2
        exit 1
    fi
fi
echo "==== radosgw up in $(elapsed "$t0") s"
# shellcheck disable=SC1091
. "$run/rgw/env"
export HDMLP_S3_SERVER=radosgw HDMLP_S3_ENDPOINT=$RGW_ENDPOINT \
    HDMLP_S3_VHOST_ENDPOINT=http://localhost:$RGW_PORT HDMLP_S3_ACCESS_KEY=$RGW_ACCESS_KEY \
    HDMLP_S3_SECRET_KEY=$RGW_SECRET_KEY HDMLP_S3_BUCKET=$RGW_BUCKET HDMLP_S3_PORT80=$RGW_PORT80
if ! run_suite radosgw; then
    rc=1
    echo "---- end of radosgw's log:" >&2
    tail -n 40 "$run/rgw/log/client.rgw.a.log" >&2 || true
fi
echo "==== rgw_suite: $(elapsed "$t_all") s in all"
exit $rc
