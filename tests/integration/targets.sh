# shellcheck shell=bash
# What the integration tests test (sourced by run.sh): a build tree or an
# installation. Each function sets, for every test file (lib.sh's run_test
# hands them on), the variables run.sh lists: devcluster, tools,
# ctld_program, plugins, python_dir, build and slurm_prefix; or says on
# stderr what is missing, and where, and returns 1. $plugin_dir
# (run.sh --plugin-dir) overrides the plugin directory either way.

# target_error WHAT: says it on stderr as run.sh's; returns 1.
target_error() {
    echo "run.sh: $*" >&2
    return 1
}

# build_targets DIR: the files of the configured build tree DIR (its Slurm:
# that of its configure --with-slurm).
build_targets() {
    build=$(cd "$1" 2>/dev/null && pwd) || target_error "--build-dir $1: no such directory" || return 1
    devcluster=$build/goldminer-devcluster
    tools=$build
    ctld_program=$build/goldminer-ctld
    plugins=${plugin_dir:-$build/.libs}
    python_dir=$build/python
    slurm_prefix=$(sed -n 's/^SLURM_PREFIX = //p' "$build/Makefile" 2>/dev/null)
    [ -n "$slurm_prefix" ] ||
        target_error "no SLURM_PREFIX in $build/Makefile (not a configured build dir?)" || return 1
    [ -x "$devcluster" ] || target_error "$devcluster not found (run make in $build)"
}

# installed_targets PREFIX: the files a `make install` (or the .debs, for
# /usr) put under PREFIX: PREFIX/bin's goldminer-devcluster and tools,
# PREFIX/sbin/goldminer-ctld, the plugins in the first of PREFIX's Slurm
# plugin directories (Debian's, then Slurm's own layouts, then configure's
# default LIBDIR/goldminer/slurm) that holds spank_goldminer.so, and the
# goldminer package of PREFIX's Python library directory. The Slurm is the
# one that goldminer-devcluster was built for (its --slurm default).
# PYTHONPATH is unset: the tests import the installed package, never one
# a caller's PYTHONPATH names.
installed_targets() {
    local prefix=${1%/} f d multiarch origin
    [ -d "$prefix/" ] || target_error "--installed $1: no such directory" || return 1
    build=
    devcluster=$prefix/bin/goldminer-devcluster
    tools=$prefix/bin
    ctld_program=$prefix/sbin/goldminer-ctld
    for f in "$devcluster" "$tools/goldminer-dw" "$tools/goldminer-consume" "$tools/goldminer-top" "$ctld_program"; do
        [ -x "$f" ] || target_error "--installed $prefix: $f not found (not installed there?)" || return 1
    done

    if [ -n "$plugin_dir" ]; then
        plugins=$plugin_dir
    else
        multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null ||
                    gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
        plugins=
        # Debian's slurm-wlm, SchedMD's slurm-smd .debs, SchedMD's RPMs and
        # `make install`, then our own default.
        for d in "$prefix/lib/$multiarch/slurm-wlm" "$prefix/lib/slurm-wlm" "$prefix/lib/$multiarch/slurm" \
                 "$prefix/lib64/slurm" "$prefix/lib/slurm" "$prefix/lib/goldminer/slurm" \
                 "$prefix/lib/$multiarch/goldminer/slurm" "$prefix/lib64/goldminer/slurm"; do
            if [ -f "$d/spank_goldminer.so" ]; then plugins=$d; break; fi
        done
        [ -n "$plugins" ] || target_error "--installed $prefix: no spank_goldminer.so in $prefix/lib/$multiarch/slurm-wlm," \
            "$prefix/lib/slurm-wlm, $prefix/lib/$multiarch/slurm, $prefix/lib64/slurm, $prefix/lib/slurm or" \
            "$prefix/lib{,/$multiarch,64}/goldminer/slurm" \
            "(pass --plugin-dir DIR)" || return 1
    fi
    [ -f "$plugins/spank_goldminer.so" ] ||
        target_error "--plugin-dir $plugins: no spank_goldminer.so there" || return 1

    slurm_prefix=$("$devcluster" --help 2>/dev/null | sed -n 's/^ *--slurm PREFIX .*\[\(.*\)\]$/\1/p')
    [ -n "$slurm_prefix" ] ||
        target_error "$devcluster --help names no --slurm default (not goldminer-devcluster?)" || return 1
    [ -x "$slurm_prefix/sbin/slurmctld" ] ||
        target_error "$devcluster was built for the Slurm in $slurm_prefix, which has no sbin/slurmctld" \
            "(install Slurm's slurmctld there)" || return 1

    unset PYTHONPATH
    python_dir=
    for d in "$prefix/lib/python3/dist-packages" "$prefix"/lib/python3.*/dist-packages \
             "$prefix"/lib/python3.*/site-packages "$prefix"/local/lib/python3.*/dist-packages; do
        if [ -f "$d/goldminer/__init__.py" ]; then python_dir=$d; break; fi
    done
    [ -n "$python_dir" ] || target_error "--installed $prefix: no goldminer package in" \
        "$prefix/lib/python3/dist-packages or $prefix/lib/python3.*/{dist,site}-packages (not installed there?)" || return 1
    # Python's own path holds it (the .debs' /usr/lib/python3/dist-packages):
    # nothing to add. Either way, python3 must import this one.
    if /usr/bin/python3 -c 'import sys; sys.exit(sys.argv[1] not in sys.path)' "$python_dir"; then
        d=$python_dir
        python_dir=
    else
        d=$python_dir
    fi
    origin=$(PYTHONPATH=$python_dir /usr/bin/python3 -c \
        'import importlib.util; print(importlib.util.find_spec("goldminer").origin)' 2>&1)
    [ "$origin" = "$d/goldminer/__init__.py" ] ||
        target_error "/usr/bin/python3${python_dir:+ (PYTHONPATH=$python_dir)} imports goldminer from $origin," \
            "not the installation's $d/goldminer" || return 1
}

# describe_targets: what is tested, on stdout.
describe_targets() {
    if [ -n "$build" ]; then
        echo "integration: testing the build tree $build (plugins $plugins)"
        return
    fi
    echo "integration: testing an installation: $devcluster, tools in $tools, $ctld_program, plugins in $plugins," \
        "python3's goldminer package $(PYTHONPATH=$python_dir /usr/bin/python3 -c \
        'import importlib.util, os; print(os.path.dirname(importlib.util.find_spec("goldminer").origin))')" \
        "${python_dir:+(PYTHONPATH=$python_dir)}"
}
