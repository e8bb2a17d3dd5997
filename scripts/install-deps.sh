#!/bin/sh
# Installs every Debian package the build, the tests and the benchmarks need.
# Idempotent: packages already present are left alone, and apt is not touched at all
# when nothing is missing.
set -eu

packages="
build-essential make pkg-config gcc clang libclang-rt-14-dev
libhwloc-dev hwloc libxml2-dev
libdw-dev
libssl-dev
openmpi-bin libopenmpi-dev
mpich libmpich-dev
python3-torch python3-numpy
python3-pip python3-setuptools python3-wheel python3-build dh-python pybuild-plugin-pyproject
mandoc man-db zsh
valgrind universal-ctags
iproute2 procps util-linux
slurmctld slurmd slurm-client slurm-wlm-basic-plugins libpmix2
hyperfine time
cmake
etcd-server etcd-client libcurl4-openssl-dev
debhelper dpkg-dev fakeroot lintian
dh-python python3-all pybuild-plugin-pyproject python3-setuptools
"

missing=""
for p in $packages; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing="$missing $p"
    fi
done

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
if [ -z "$missing" ]; then
    echo "install-deps: all packages present"
else
    echo "install-deps: installing:$missing"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -q
    # shellcheck disable=SC2086
    $SUDO apt-get install -y -q --no-install-recommends $missing
fi

# MPICH (mpiexec.hydra, mpicc.mpich) is installed beside Open MPI, which
# stays the default: mpirun, mpiexec and mpicc are Open MPI's (Debian's
# alternatives give it priority 50 over MPICH's 40, unless someone chose
# MPICH by hand).  Tests call mpiexec.hydra by name.
for alt in mpirun:/usr/bin/mpirun.openmpi mpi:/usr/bin/mpicc.openmpi; do
    name=${alt%%:*} want=${alt#*:}
    if [ "$(readlink -f "/etc/alternatives/$name")" != "$(readlink -f "$want")" ]; then
        echo "install-deps: $name pointed elsewhere; making Open MPI the default"
        $SUDO update-alternatives --set "$name" "$want"
    fi
done
