#!/usr/bin/env bash
# Installs the Debian packages hdmlp needs. Idempotent: does nothing when all are present.
# Used by both README quick-start commands and by .ci/run.
set -euo pipefail

PKGS=(
  build-essential cmake pkg-config gcc clang clang-format git openssl
  libarchive-dev libzstd-dev libxxhash-dev libturbojpeg0-dev libjpeg62-turbo-dev libspng-dev
  libgrpc-dev protobuf-c-compiler libprotobuf-c-dev
  libopenmpi-dev openmpi-bin
  libcriterion-dev liburing-dev libclang-rt-14-dev valgrind time
  python3-dev python3-numpy python3-torch python3-torchvision python3-pytest
  python3-setuptools python3-pil python3-venv python3-pip python3-build python3-wheel
  dataset-fashion-mnist
  fio gnuplot-nox e2fsprogs util-linux
  libcurl4-openssl-dev libssl-dev nginx-light
  ceph-mon ceph-osd radosgw awscli python3-botocore
)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "deps: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q >/dev/null
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
