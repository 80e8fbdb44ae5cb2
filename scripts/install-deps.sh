#!/bin/sh
# Installs every Debian package that the build, the demo and the tests need,
# plus Slurm's source tree (internal headers for the select plugin).
# Idempotent: a second run installs nothing and re-uses the source tree.
#
# Usage: scripts/install-deps.sh [SLURM_SRC_PARENT]
#   SLURM_SRC_PARENT  where the Slurm source tree is unpacked
#                     (default: /usr/local/src/goldminer)
set -eu

src_parent=${1:-/usr/local/src/goldminer}

say() { printf 'install-deps: %s\n' "$*"; }

if [ "$(id -u)" -ne 0 ]; then
    say "must run as root (apt-get install)" >&2
    exit 1
fi

packages="
 build-essential autoconf automake libtool pkg-config dpkg-dev
 slurm-wlm slurmctld slurmd slurm-client libslurm-dev
 munge libmunge-dev libpam0g-dev libpmix-dev
 openmpi-bin libopenmpi-dev libucx-dev ucx-utils libhwloc-dev
 libboost-program-options-dev libgtest-dev libgmock-dev googletest
 clang libclang-rt-14-dev
 libtorch-dev python3-torch python3-torchvision python3-pybind11 python3-numpy
 libopenblas0-pthread
 libjpeg62-turbo-dev
 iproute2 util-linux procps
 jq curl
"

missing=""
for p in $packages; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing="$missing $p"
    fi
done

export DEBIAN_FRONTEND=noninteractive
if [ -n "$missing" ]; then
    say "installing:$missing"
    apt-get update -q
    # shellcheck disable=SC2086
    apt-get install -y -q --no-install-recommends $missing
else
    say "all packages present"
fi

# Slurm's internal headers: the source package of the installed version.
slurm_ver=$(dpkg-query -W -f='${Version}' slurmctld)
upstream=${slurm_ver#*:}
upstream=${upstream%%-*}
tree="$src_parent/slurm-wlm-$upstream"
if [ -f "$tree/config.h" ]; then
    say "slurm source present: $tree"
else
    if ! apt-get source --print-uris slurm-wlm >/dev/null 2>&1; then
        # Add deb-src for the same archive as the existing deb entries.
        say "adding deb-src entries"
        if [ -f /etc/apt/sources.list.d/debian.sources ]; then
            sed -e 's/^Types: deb$/Types: deb-src/' \
                /etc/apt/sources.list.d/debian.sources \
                >/etc/apt/sources.list.d/goldminer-src.sources
        elif [ -f /etc/apt/sources.list ]; then
            grep -E '^deb ' /etc/apt/sources.list | grep debian \
                | sed 's/^deb /deb-src /' >/etc/apt/sources.list.d/goldminer-src.list
        fi
        apt-get update -q
    fi
    mkdir -p "$src_parent"
    cd "$src_parent"
    if [ ! -d "$tree" ]; then
        apt-get source -q "slurm-wlm=$slurm_ver"
        # apt-get source names the tree slurm-wlm-<upstream>
    fi
    say "configuring slurm source for its headers (config.h)"
    cd "$tree"
    ./configure -q --prefix=/usr --sysconfdir=/etc/slurm >configure.out 2>&1 || {
        tail -20 configure.out >&2
        say "slurm configure failed in $tree" >&2
        exit 1
    }
fi
say "slurm source: $tree"
