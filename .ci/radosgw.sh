#!/usr/bin/env bash
# A one-node Ceph with the RADOS Gateway (radosgw, an S3 server) on 127.0.0.1, for the
# object-storage tests: one monitor, one OSD on memstore (RAM, nothing on disk but logs),
# no cephx between the daemons, pool size 1, every address 127.0.0.1.
#
#   bash .ci/radosgw.sh install        installs the Debian packages when missing (apt-get)
#   bash .ci/radosgw.sh start DIR      starts the daemons in the new run dir DIR, creates the
#                                      S3 user and bucket; writes DIR/env (sourceable:
#                                      RGW_PORT RGW_ENDPOINT RGW_ACCESS_KEY RGW_SECRET_KEY
#                                      RGW_BUCKET RGW_PORT80) and prints it
#   bash .ci/radosgw.sh stop DIR       stops every daemon by the pid it wrote in DIR, then
#                                      removes DIR
#
# radosgw also listens on 127.0.0.1:80 when that port is free (RGW_PORT80=1): the tests of
# an endpoint naming its scheme's default port need it. On failure `start` says which step
# failed, prints the end of that daemon's log, stops what it started and exits non-zero.
set -euo pipefail

PKGS=(ceph-mon ceph-osd radosgw awscli python3-botocore)

die() {
    echo "radosgw.sh: $*" >&2
    exit 1
}

install_pkgs() {
    local missing=() p
    for p in "${PKGS[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
            missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    command -v apt-get >/dev/null || die "apt-get not found: cannot install ${missing[*]}"
    echo "radosgw.sh: installing ${missing[*]}" >&2
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -q >/dev/null
    $sudo apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null ||
        die "apt-get install ${missing[*]} failed"
}

# A TCP port on 127.0.0.1 that nothing listens on, below the ephemeral range.
free_port() {
    python3 - <<'EOF'
import random, socket
lo = 20000
try:
    lo = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
except OSError:
    pass
for _ in range(200):
    p = random.randrange(10000, max(lo, 10001))
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
        s.close()
        print(p)
        break
    except OSError:
        s.close()
EOF
}

port_free() {
    python3 -c "import socket,sys
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try: s.bind(('127.0.0.1', int(sys.argv[1])))
except OSError: sys.exit(1)" "$1"
}

wait_for() { # wait_for SECONDS WHAT COMMAND...
    local limit=$1 what=$2
    shift 2
    local t=0
    until "$@" >/dev/null 2>&1; do
        sleep 0.2
        t=$((t + 1))
        if [ $t -ge $((limit * 5)) ]; then
            echo "radosgw.sh: $what did not come up within ${limit}s" >&2
            return 1
        fi
    done
}

show_log() {
    local f=$1
    if [ -f "$f" ]; then
        echo "---- last lines of $f" >&2
        tail -n 25 "$f" >&2
    fi
}

stop_daemons() {
    local dir=$1 f pid
    for f in "$dir"/run/*.pid; do
        [ -f "$f" ] || continue
        pid=$(cat "$f" 2>/dev/null || true)
        [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null || true
    done
    for f in "$dir"/run/*.pid; do
        [ -f "$f" ] || continue
        pid=$(cat "$f" 2>/dev/null || true)
        [ -n "$pid" ] || continue
        for _ in $(seq 20); do # memstore keeps nothing: no need to wait long
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null || true
    done
}

start() {
    local dir=$1
    [ -n "$dir" ] || die "start needs a run dir"
    for p in ceph-mon ceph-osd radosgw radosgw-admin monmaptool ceph-authtool ceph python3; do
        command -v "$p" >/dev/null ||
            die "$p not found (install: bash .ci/radosgw.sh install, or apt-get install ${PKGS[*]})"
    done
    mkdir -p "$dir"/{mon,osd,run,log}
    dir=$(cd "$dir" && pwd)
    local mon_port rgw_port fsid conf port80=0
    mon_port=$(free_port)
    rgw_port=$(free_port)
    [ -n "$mon_port" ] && [ -n "$rgw_port" ] && [ "$mon_port" != "$rgw_port" ] ||
        die "no free ports on 127.0.0.1"
    fsid=$(python3 -c 'import uuid; print(uuid.uuid4())')
    local frontends="beast endpoint=127.0.0.1:$rgw_port"
    if port_free 80; then
        frontends="$frontends endpoint=127.0.0.1:80"
        port80=1
    fi
    conf=$dir/ceph.conf
    cat >"$conf" <<EOF
[global]
fsid = $fsid
mon host = v2:127.0.0.1:$mon_port
mon initial members = a
public addr = 127.0.0.1
public network = 127.0.0.1/32
ms bind ipv4 = true
ms bind ipv6 = false
auth cluster required = none
auth service required = none
auth client required = none
auth allow insecure global id reclaim = true
ms cluster mode = crc
ms service mode = crc
ms client mode = crc
ms mon cluster mode = crc
ms mon service mode = crc
ms mon client mode = crc
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool delete = true
mon warn on pool no redundancy = false
mon data avail warn = 1
mon data avail crit = 0
run dir = $dir/run
pid file = $dir/run/\$name.pid
admin socket = $dir/run/\$name.asok
log file = $dir/log/\$name.log
keyring = $dir/keyring
[mon]
mon data = $dir/mon/\$name
[osd]
osd data = $dir/osd/\$name
osd objectstore = memstore
memstore device bytes = 2147483648
osd max object size = 134217728
[client.rgw.a]
rgw frontends = $frontends
rgw dns name = localhost
rgw thread pool size = 32
rgw enable usage log = false
EOF
    # Every step below stops what it started before failing.
    trap 'stop_daemons "$dir"' ERR
    ceph-authtool --create-keyring "$dir/keyring" --gen-key -n mon. --cap mon 'allow *' \
        >/dev/null
    monmaptool --create --fsid "$fsid" --addv a "[v2:127.0.0.1:$mon_port]" "$dir/monmap" \
        >/dev/null
    ceph-mon -c "$conf" --mkfs -i a --monmap "$dir/monmap" --keyring "$dir/keyring" ||
        { show_log "$dir/log/mon.a.log"; die "ceph-mon --mkfs failed"; }
    ceph-mon -c "$conf" -i a 2>>"$dir/log/stderr.log" ||
        { show_log "$dir/log/mon.a.log"; die "ceph-mon did not start"; }
    wait_for 30 "the monitor" ceph -c "$conf" --connect-timeout 5 mon stat ||
        { show_log "$dir/log/mon.a.log"; stop_daemons "$dir"; die "monitor unreachable"; }
    local uuid id
    uuid=$(python3 -c 'import uuid; print(uuid.uuid4())')
    id=$(ceph -c "$conf" osd new "$uuid")
    mkdir -p "$dir/osd/osd.$id"
    ceph-osd -c "$conf" -i "$id" --mkfs --osd-uuid "$uuid" >/dev/null 2>&1 ||
        { show_log "$dir/log/osd.$id.log"; stop_daemons "$dir"; die "ceph-osd --mkfs failed"; }
    ceph-osd -c "$conf" -i "$id" 2>>"$dir/log/stderr.log" ||
        { show_log "$dir/log/osd.$id.log"; stop_daemons "$dir"; die "ceph-osd did not start"; }
    wait_for 60 "the OSD" sh -c "ceph -c '$conf' osd stat -f json | grep -q '\"num_up_osds\":1'" ||
        { show_log "$dir/log/osd.$id.log"; stop_daemons "$dir"; die "the OSD is not up"; }
    radosgw -c "$conf" -n client.rgw.a 2>>"$dir/log/stderr.log" ||
        { show_log "$dir/log/client.rgw.a.log"; stop_daemons "$dir"; die "radosgw did not start"; }
    wait_for 90 "radosgw" python3 -c "import urllib.request
urllib.request.urlopen('http://127.0.0.1:$rgw_port/', timeout=2)" ||
        { show_log "$dir/log/client.rgw.a.log"; stop_daemons "$dir"; die "radosgw does not answer"; }
    local ak=hdmlprgwkey sk=hdmlp/rgw/secret
    radosgw-admin -c "$conf" -n client.rgw.a user create --uid hdmlp --display-name hdmlp \
        --access-key "$ak" --secret-key "$sk" >/dev/null 2>"$dir/log/user.log" ||
        { show_log "$dir/log/user.log"; stop_daemons "$dir"; die "radosgw-admin user create failed"; }
    python3 - "$rgw_port" "$ak" "$sk" <<'EOF' ||
import sys, botocore.session, botocore.config
s = botocore.session.get_session()
c = s.create_client("s3", region_name="us-east-1", endpoint_url="http://127.0.0.1:%s" % sys.argv[1],
                    aws_access_key_id=sys.argv[2], aws_secret_access_key=sys.argv[3],
                    config=botocore.config.Config(s3={"addressing_style": "path"}))
c.create_bucket(Bucket="hdmlp")
EOF
        { stop_daemons "$dir"; die "cannot create the bucket (python3-botocore missing?)"; }
    trap - ERR
    cat >"$dir/env" <<EOF
RGW_PORT=$rgw_port
RGW_ENDPOINT=http://127.0.0.1:$rgw_port
RGW_ACCESS_KEY=$ak
RGW_SECRET_KEY=$sk
RGW_BUCKET=hdmlp
RGW_PORT80=$port80
EOF
    cat "$dir/env"
}

stop() {
    local dir=$1
    [ -n "$dir" ] && [ -d "$dir" ] || return 0
    stop_daemons "$dir"
    rm -rf "$dir"
}

case "${1:-}" in
install) install_pkgs ;;
start) start "${2:-}" ;;
stop) stop "${2:-}" ;;
*)
    echo "usage: $0 install | start DIR | stop DIR" >&2
    exit 2
    ;;
esac
