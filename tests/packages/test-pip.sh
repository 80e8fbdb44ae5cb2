#!/bin/sh
# `pip install ./python` from each place python/setup.py builds from
# (python/build_source.py), on a copy of this checkout's tracked files
# (committed or not; a new file counts once `git add`ed) in BUILD_DIR/pip-test:
#
#   error      with nothing to build from, pip fails with the one error that
#              names the three places setup.py looked at;
#   in-tree    the copy "configured in-tree": BUILD_DIR's configure output
#              that setup.py reads (configure, python-build-info.txt,
#              gm_config.h, python/goldminer/_build_info.py) copied into it,
#              since a real in-tree ./configure && make takes minutes (the
#              copied python-build-info.txt names this checkout's sources
#              and BUILD_DIR's archives); `pip wheel` builds a wheel from it;
#   installed  `make install DESTDIR=ROOT` of BUILD_DIR, then `pip install
#              --target` against ROOT's goldminer-python.pc through
#              PKG_CONFIG_PATH and PKG_CONFIG_SYSROOT_DIR; its _session
#              links the same shared libraries as BUILD_DIR's own;
#   wheel      the in-tree wheel installed with `pip install --target` into
#              another folder, then `import goldminer, goldminer._session`
#              and `python -m goldminer --version` there, under Debian's
#              python3 and, when given, TORCH2_PYTHON (the same CPython).
#
# BUILD_DIR: a configured and built build directory of this checkout.
# Prints PASS/FAIL/SKIP lines and `pip: N passed, N failed, N skipped`;
# exit status 0 only if nothing failed.
#
# Usage: tests/packages/test-pip.sh BUILD_DIR [TORCH2_PYTHON]
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:?usage: test-pip.sh BUILD_DIR [TORCH2_PYTHON]}
build=$(cd "$build" && pwd) || exit 2
torch2_python=${2:-}
python=/usr/bin/python3
. "$top/scripts/compiler-cache"
passed=0 failed=0 skipped=0
pass() { echo "PASS: $1"; passed=$((passed + 1)); }
fail() { echo "FAIL: $1"; failed=$((failed + 1)); }
skip() { echo "SKIP: $1"; skipped=$((skipped + 1)); }
tally() { echo "pip: $passed passed, $failed failed, $skipped skipped"; [ "$failed" -eq 0 ]; }
# show FILE: the end of a step's output, after its FAIL line.
show() { tail -25 "$1" | sed 's/^/    /'; }

scratch=$build/pip-test
tree=$scratch/tree
root=$scratch/root
rm -rf "$scratch"
mkdir -p "$tree" "$scratch/wheels" "$scratch/empty"
if [ ! -f "$build/python-build-info.txt" ]; then
    fail "setup: $build has no python-build-info.txt (configure and build it first)"
    tally
    exit
fi
# The tracked files as they are now (git stash create: a commit of the
# working tree's changes; nothing when there are none).
if ! rev=$(git -C "$top" stash create) || ! git -C "$top" archive "${rev:-HEAD}" | tar -x -C "$tree"; then
    skip "setup: $top is not a git checkout: no tree to copy"
    tally
    exit
fi
version=$(sed -n 's/^version\t//p' "$build/python-build-info.txt")
# GOLDMINER_BUILD_DIR is setup.py's first place: unset, so that each step
# finds the place it sets up.
unset GOLDMINER_BUILD_DIR
# pip_build PIP_COMMAND ARG...: pip with the environment's setuptools and
# pybind11; its verbose log carries setup.py's line saying what it built from.
pip_build() {
    cmd=$1
    shift
    "$python" -m pip "$cmd" -v --no-deps --no-build-isolation --disable-pip-version-check "$@"
}

# error: no GOLDMINER_BUILD_DIR, the copy neither configured nor with a
# ../build, and no goldminer-python.pc where pkg-config looks.
if (cd "$tree" && export PKG_CONFIG_PATH="$scratch/empty" PKG_CONFIG_LIBDIR="$scratch/empty" &&
        pip_build wheel -w "$scratch/wheels" ./python) >"$scratch/error.out" 2>&1; then
    fail "error: pip built from a tree with nothing to build from"
elif grep -q "looked at (1) GOLDMINER_BUILD_DIR: not set; (2) the source tree $tree: not configured in-tree" \
        "$scratch/error.out" && grep -q "(3) an installed suite: pkg-config finds no goldminer-python.pc" \
        "$scratch/error.out"; then
    pass "error: nothing to build from names the three places"
else
    fail "error: pip failed without the error naming the three places"
    show "$scratch/error.out"
fi

# in-tree
cp "$top/configure" "$build/python-build-info.txt" "$build/gm_config.h" "$tree/" &&
    cp "$build/python/goldminer/_build_info.py" "$tree/python/goldminer/" ||
    { fail "in-tree: copying $build's configure output into $tree"; tally; exit; }
if (cd "$tree" && pip_build wheel -w "$scratch/wheels" ./python) \
        >"$scratch/in-tree.out" 2>&1 &&
   grep -q "goldminer setup.py: building goldminer $version from the source tree, configured in-tree, $tree\$" \
        "$scratch/in-tree.out" &&
   wheel=$(ls "$scratch"/wheels/goldminer-"$version"-*.whl 2>/dev/null) && [ -n "$wheel" ]; then
    pass "in-tree: pip wheel from a source tree configured in-tree"
else
    wheel=
    fail "in-tree: pip wheel from a source tree configured in-tree"
    show "$scratch/in-tree.out"
fi
rm -rf "$tree/configure" "$tree/python-build-info.txt" "$tree/gm_config.h" "$tree/python/goldminer/_build_info.py" \
    "$tree/python-setup"

# installed: a sysroot holds the system's libraries too; this staged one
# gets the library folders the .pc names outside the staged prefix.
if make -s -C "$build" install DESTDIR="$root" >"$scratch/install.out" 2>&1 &&
   pc=$(find "$root" -name goldminer-python.pc) && [ -n "$pc" ]; then
    pc_dir=$(dirname "$pc")
    for d in $(PKG_CONFIG_PATH=$pc_dir pkg-config --libs-only-L --static goldminer-python); do
        d=${d#-L}
        if [ -d "$d" ] && [ ! -e "$root$d" ]; then mkdir -p "$(dirname "$root$d")" && ln -s "$d" "$root$d"; fi
    done
    if (cd "$tree" && export PKG_CONFIG_PATH="$pc_dir" PKG_CONFIG_SYSROOT_DIR="$root" &&
            pip_build install --target "$scratch/installed" ./python) >"$scratch/installed.out" 2>&1 &&
       grep -q "goldminer setup.py: building goldminer $version from the installed suite of $pc\$" \
            "$scratch/installed.out" &&
       (cd / && PYTHONPATH=$scratch/installed "$python" -c 'import goldminer, goldminer._session') \
            >>"$scratch/installed.out" 2>&1; then
        pass "installed: pip install --target against make install DESTDIR's goldminer-python.pc"
        needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort; }
        if needed "$build"/python/goldminer/_session.*so >"$scratch/needed-build" &&
           needed "$scratch"/installed/goldminer/_session.*so >"$scratch/needed-installed" &&
           [ -s "$scratch/needed-build" ] && diff "$scratch/needed-build" "$scratch/needed-installed"; then
            pass "installed: _session links the shared libraries of the build's own ($(tr '\n' ' ' <"$scratch/needed-build"))"
        else
            fail "installed: _session links other shared libraries than the build's own (<: build's, >: installed)"
        fi
    else
        fail "installed: pip install --target against make install DESTDIR's goldminer-python.pc"
        show "$scratch/installed.out"
    fi
else
    fail "installed: make install DESTDIR=$root installed no goldminer-python.pc"
    show "$scratch/install.out"
fi

# wheel
n=0
for py in "$python" $torch2_python; do
    n=$((n + 1))
    target=$scratch/wheel-$n
    if [ ! -x "$py" ]; then
        skip "wheel: $py is no executable"
    elif [ -z "$wheel" ]; then
        skip "wheel: $py: no wheel was built (in-tree failed)"
    elif "$py" -m pip install --no-deps --no-index --disable-pip-version-check --target "$target" "$wheel" \
            >"$target.out" 2>&1 &&
         (cd / && PYTHONPATH=$target "$py" -c 'import goldminer, goldminer._session' &&
          PYTHONPATH=$target "$py" -m goldminer --version) >>"$target.out" 2>&1 &&
         grep -q "^goldminer $version\$" "$target.out"; then
        pass "wheel: $py imports goldminer._session from the wheel installed with --target ($(grep '^torch ' "$target.out"))"
    else
        fail "wheel: $py: the wheel installed with --target"
        show "$target.out"
    fi
done
tally
