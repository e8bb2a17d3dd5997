#!/bin/sh
# Installs every Debian package the build, the tests and the benchmarks need.
# Idempotent: packages already present are left alone, and apt is not touched at all
# when nothing is missing.
set -eu

packages="
build-essential make pkg-config gcc clang libclang-rt-14-dev
libhwloc-dev hwloc
openmpi-bin libopenmpi-dev
python3-torch python3-numpy
mandoc man-db
valgrind
iproute2 procps util-linux
slurmctld slurmd slurm-client slurm-wlm-basic-plugins libpmix2
hyperfine time
"

missing=""
for p in $packages; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing="$missing $p"
    fi
done

if [ -z "$missing" ]; then
    echo "install-deps: all packages present"
    exit 0
fi

echo "install-deps: installing:$missing"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
# shellcheck disable=SC2086
$SUDO apt-get install -y -q --no-install-recommends $missing
