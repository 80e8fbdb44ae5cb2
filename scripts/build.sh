#!/bin/sh
# Configures and builds the project out of tree in BUILD_DIR (default ./build).
# Used by scripts/demo and scripts/run-tests; assumes scripts/install-deps.sh ran.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/build}

cd "$top"
if [ ! -x configure ] || [ configure.ac -nt configure ] || [ Makefile.am -nt Makefile.in ]; then
    echo "build: autoreconf"
    autoreconf -fi >/dev/null
fi
mkdir -p "$build"
cd "$build"
if [ ! -f Makefile ] || [ "$top/configure" -nt config.status ]; then
    echo "build: configure in $build"
    "$top/configure" --prefix=/usr/local >configure.out 2>&1 || {
        tail -30 configure.out >&2
        echo "build: configure failed (full output: $build/configure.out)" >&2
        exit 1
    }
    sed -n '/^goldminer-slurm .* configuration/,$p' configure.out
fi
echo "build: make"
make -j"$(nproc)" >make.out 2>&1 || {
    tail -40 make.out >&2
    echo "build: make failed (full output: $build/make.out)" >&2
    exit 1
}
echo "build: done ($build)"
