#!/usr/bin/env bash
# Regenerates the throwaway TLS test files in this directory (tests/rpc/test_tls.c):
#   ca.pem                the test CA (its key is thrown away)
#   rank.pem, rank.key    a peer certificate signed by that CA, for 127.0.0.1, ::1 and
#                         localhost, usable as server and client certificate
#   rogue.pem, rogue.key  the same, but signed by another CA (must be refused)
# EC P-256 keys, valid for 100 years, so the committed files do not expire. Needs the
# openssl command (Debian package openssl). Usage: bash tests/data/tls/make.sh
set -euo pipefail
out=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
days=36500

ca() { # name subject
    openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 \
        -keyout "$tmp/$1.key" -out "$tmp/$1.pem" -days $days -subj "/CN=$2" \
        -addext "basicConstraints=critical,CA:TRUE" \
        -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
}

leaf() { # name ca
    openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 \
        -keyout "$tmp/$1.key" -out "$tmp/$1.csr" -subj "/CN=hdmlp test peer" 2>/dev/null
    cat >"$tmp/$1.ext" <<EXT
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost
EXT
    openssl x509 -req -in "$tmp/$1.csr" -CA "$tmp/$2.pem" -CAkey "$tmp/$2.key" \
        -CAcreateserial -out "$tmp/$1.pem" -days $days -extfile "$tmp/$1.ext" 2>/dev/null
}

ca ca "hdmlp test CA"
ca other "hdmlp other test CA"
leaf rank ca
leaf rogue other
openssl verify -CAfile "$tmp/ca.pem" "$tmp/rank.pem" >/dev/null
if openssl verify -CAfile "$tmp/ca.pem" "$tmp/rogue.pem" >/dev/null 2>&1; then
    echo "make.sh: rogue.pem verifies against ca.pem" >&2
    exit 1
fi
cp "$tmp/ca.pem" "$tmp/rank.pem" "$tmp/rank.key" "$tmp/rogue.pem" "$tmp/rogue.key" "$out/"
chmod 644 "$out"/*.pem "$out"/*.key
echo "make.sh: wrote ca.pem rank.pem rank.key rogue.pem rogue.key in $out"
