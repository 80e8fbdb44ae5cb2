#!/bin/sh
# Configures and builds the project out of tree in BUILD_DIR (default ./build),
# passing CONFIGURE_ARG... to configure (e.g. --with-slurm=/opt/slurm-24.11);
# reconfigures when they change.
# Used by scripts/demo and scripts/run-tests; assumes scripts/install-deps.sh ran.
#
# Usage: scripts/build.sh [BUILD_DIR [CONFIGURE_ARG...]]
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build}
. "$top/scripts/compiler-cache"
[ $# -eq 0 ] || shift

cd "$top"
if [ ! -x configure ] || [ configure.ac -nt configure ] || [ Makefile.am -nt Makefile.in ]; then
    echo "build: autoreconf"
    autoreconf -fi >/dev/null
fi
mkdir -p "$build"
cd "$build"
args="--prefix=/usr/local $*"
if [ ! -f Makefile ] || [ "$top/configure" -nt config.status ] ||
   [ "$(cat configure.args 2>/dev/null)" != "$args" ]; then
    echo "build: configure in $build ($args)"
    rm -f configure.args
    # shellcheck disable=SC2086  # one word per argument, as given
    "$top/configure" $args >configure.out 2>&1 || {
        tail -30 configure.out >&2
        echo "build: configure failed (full output: $build/configure.out)" >&2
        exit 1
    }
    printf '%s\n' "$args" >configure.args
    sed -n '/^goldminer-slurm .* configuration/,$p' configure.out
fi
echo "build: make"
make -j"$(nproc)" >make.out 2>&1 || {
    tail -40 make.out >&2
    echo "build: make failed (full output: $build/make.out)" >&2
    exit 1
}
echo "build: done ($build)"
