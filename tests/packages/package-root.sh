#!/bin/bash
# Builds and tests the Debian packages as a site of one kind would, in a
# root made with debootstrap for that site. SITE is one of:
#   debian13  Debian 13 ("trixie") with its own Slurm (24.11), Python and
#             torch (python3-torch, libtorch-dev);
#   smd       Debian 12 ("bookworm") with SchedMD's own Slurm packages
#             (slurm-smd, slurm-smd-dev, slurm-smd-slurmctld, ...), built in
#             the root from SchedMD's release tarball with the debian/
#             packaging it carries (--slurm-tarball; default: 25.11.7 from
#             ../shared/slurm beside SRC_DIR), and Debian 12's Python and
#             torch.
# Runs on any Debian host.
#
#   1. The root (once, cached; a stamp per step): debootstrap --variant=minbase,
#      then the packages the build and the tests need (the suite's names for
#      scripts/install-deps.sh's list, debhelper, ...) and the site's Slurm:
#      debian13: the suite's slurm-wlm packages, and the configured source
#      tree of its slurm-wlm (the select plugin's internal headers), as
#      scripts/install-deps.sh makes it on Debian 12; smd: SchedMD's packages
#      (dpkg-buildpackage of the tarball's debian/, the .debs kept in the
#      root's /var/cache/goldminer-smd, then installed with apt) and the same
#      release's source tree, configured.
#   2. In the root, from a git clone of SRC_DIR's HEAD (committed work only):
#      the package's Build-Depends (apt-get build-dep), configure against the
#      site's Slurm (configure finds its plugin directory), `make deb`, then
#      tests/packages/test-debs.sh on the .debs (installs them with apt,
#      brings goldminer-devcluster up from the installed files, runs the
#      integration tests against them, upgrades and removes them).
#
# The root shares the host's network namespace and loopback: --port-base
# must differ from other clusters' on the host. /proc, /sys and /dev are
# mounted in the root and /run is a tmpfs of its own (munged's and slurmd's
# runtime directories), all unmounted on exit.
#
# Prints PASS/FAIL/SKIP lines, then `SITE: N passed, N failed, N skipped`;
# exits non-zero on any failure.
#
# Usage: tests/packages/package-root.sh [--root DIR] [--work DIR]
#            [--port-base PORT] [--only REGEX] [--debs DIR] [--root-only]
#            [--slurm-tarball FILE] [--keep] SITE SRC_DIR
#   --root DIR       the cached root (default /var/cache/goldminer/SITE-root)
#   --work DIR       host directory mounted at the same path in the root for
#                    the clone, the build, the .debs, the devcluster's state
#                    and the logs (default /var/tmp/goldminer-SITE)
#   --port-base PORT the devcluster's first port (default 23200 for debian13,
#                    23300 for smd)
#   --only REGEX     the integration tests test-debs.sh runs (its default:
#                    a subset; '.' runs them all)
#   --debs DIR       test these .debs (a directory under --work) instead of
#                    building them
#   --root-only      phase 1 only: make or update the root, build nothing
#   --slurm-tarball FILE  smd: SchedMD's release tarball, checked against a
#                    SHA256SUMS beside it (default SRC_DIR/../shared/slurm/
#                    slurm-25.11.7.tar.xz)
#   --keep           leave the build directory (the .debs are always kept)
# Environment: GOLDMINER_BUILD_LOCK, a lock file the builds hold (flock) so
# that they do not run beside other builds on a small machine (unset: none).
# The steps are run through step() and the cleanup through trap, which
# the checker cannot follow.
# shellcheck disable=SC2317
set -u

root=
work=
port_base=
root_only=no
keep=no
only=
prebuilt=
tarball=
readonly mirror=http://deb.debian.org/debian
usage="usage: package-root.sh [--root DIR] [--work DIR] [--port-base PORT] [--only REGEX] [--debs DIR] [--root-only] [--slurm-tarball FILE] [--keep] debian13|smd SRC_DIR"

die() { echo "package-root: $*" >&2; exit 2; }
say() { echo "package-root: $*"; }
# fetch_orig: the .orig tarball's download and check, as install-deps.sh's.
# shellcheck source=scripts/install-slurm-release.sh
. "$(dirname "$0")/../../scripts/install-slurm-release.sh"
while [ $# -gt 0 ]; do
    case $1 in
        --root) [ $# -ge 2 ] || die "--root: missing value ($usage)"; root=$2; shift 2 ;;
        --work) [ $# -ge 2 ] || die "--work: missing value ($usage)"; work=$2; shift 2 ;;
        --port-base) [ $# -ge 2 ] || die "--port-base: missing value ($usage)"; port_base=$2; shift 2 ;;
        --only) [ $# -ge 2 ] || die "--only: missing value ($usage)"; only=$2; shift 2 ;;
        --debs) [ $# -ge 2 ] || die "--debs: missing value ($usage)"; prebuilt=$2; shift 2 ;;
        --root-only) root_only=yes; shift ;;
        --slurm-tarball) [ $# -ge 2 ] || die "--slurm-tarball: missing value ($usage)"; tarball=$2; shift 2 ;;
        --keep) keep=yes; shift ;;
        -*) die "unknown option '$1' ($usage)" ;;
        *) break ;;
    esac
done
[ $# -eq 2 ] || die "$usage"
site=$1
case $site in
    debian13) suite=trixie; default_port=23200 ;;
    smd) suite=bookworm; default_port=23300 ;;
    *) die "SITE: unknown site '$site': expected debian13 or smd ($usage)" ;;
esac
src=$(cd "$2" 2>/dev/null && pwd) || die "SRC_DIR: no such directory: $2"
root=${root:-/var/cache/goldminer/$site-root}
work=${work:-/var/tmp/goldminer-$site}
port_base=${port_base:-$default_port}
if [ "$site" = smd ]; then
    tarball=${tarball:-$src/../shared/slurm/slurm-25.11.7.tar.xz}
    [ -f "$tarball" ] || die "--slurm-tarball: $tarball: no such file (SchedMD's release tarball: ../shared/slurm/ or https://download.schedmd.com/slurm/)"
    tarball=$(cd "$(dirname "$tarball")" && pwd)/$(basename "$tarball")
    smd_version=${tarball##*/slurm-}
    smd_version=${smd_version%.tar.*}
    case $smd_version in
        [0-9]*.[0-9]*.[0-9]*) ;;
        *) die "--slurm-tarball: $tarball is not named slurm-X.Y.Z.tar.* as SchedMD's releases are" ;;
    esac
elif [ -n "$tarball" ]; then
    die "--slurm-tarball: only for the smd site"
fi
[ -d "$src/.git" ] || die "SRC_DIR: $src is not a git checkout (the root builds a clone of its HEAD)"
case $port_base in
    ''|*[!0-9]*) die "--port-base: invalid value '$port_base': expected a port number" ;;
esac
case $root in /*) ;; *) die "--root: invalid value '$root': expected an absolute path" ;; esac
case $work in /*) ;; *) die "--work: invalid value '$work': expected an absolute path" ;; esac
if [ -n "$prebuilt" ]; then
    prebuilt=$(cd "$prebuilt" 2>/dev/null && pwd) || die "--debs: no such directory: $prebuilt"
    case $prebuilt/ in "$work"/*) ;; *) die "--debs: $prebuilt is not under --work $work (only that is mounted in the root)" ;; esac
fi
[ "$(id -u)" -eq 0 ] || die "must run as root (debootstrap, chroot, mount)"
for cmd in debootstrap chroot mount umount flock git; do
    command -v "$cmd" >/dev/null || die "$cmd not found (apt-get install debootstrap util-linux mount git)"
done

# shellcheck source=tests/integration/tally.sh
. "$(dirname "$0")/../integration/tally.sh"
finish() {
    tally_line "$site"
    exit $(( failed > 0 ))
}

mkdir -p "$work" "$(dirname "$root")" || die "cannot create $work or $(dirname "$root")"
logs=$work/logs
mkdir -p "$logs"
# One run per root at a time: the mounts and the package state are shared.
exec 9>"$root.lock" || die "cannot open $root.lock"
flock -n 9 || die "$root is in use by another package-root.sh (lock $root.lock)"

# ------------------------------------------------------------ mounts
mounted=()
mount_in_root() {  # mount_in_root TARGET MOUNT-ARGS...
    local target=$root${1%/}; shift
    mkdir -p "$target" && mount "$@" "$target" || return 1
    mounted+=("$target")
}
# Processes left in the root (a daemon a failed test did not stop) keep its
# mounts busy: each was started by this run, inside this root.
stop_root_processes() {
    local p r pids=
    for p in /proc/[0-9]*; do
        r=$(readlink "$p/root" 2>/dev/null) || continue
        [ "$r" = "$root" ] && pids="$pids ${p#/proc/}"
    done
    [ -z "$pids" ] && return 0
    echo "package-root: stopping processes left in the root:$pids" >&2
    for p in $pids; do kill -TERM "$p" 2>/dev/null; done
    sleep 2
    for p in $pids; do kill -KILL "$p" 2>/dev/null; done
    return 0
}
unmount_root() {
    local i
    [ ${#mounted[@]} -gt 0 ] || return 0
    stop_root_processes
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
        umount -R "${mounted[i]}" 2>/dev/null || umount -R -l "${mounted[i]}" ||
            echo "package-root: cannot unmount ${mounted[i]}" >&2
    done
    mounted=()
}
trap unmount_root EXIT
trap 'exit 130' INT TERM

# The root is first bound onto itself, so that its / is a mount point
# within the chroot, as a machine's is: `unshare --mount` (whose default
# makes / private) and the devcluster's node namespaces need one.
mount_root() {
    mount_in_root / --bind "$root" && mount --make-private "$root" || return 1
    mount_in_root /proc -t proc proc || return 1
    mount_in_root /sys --rbind /sys && mount --make-rslave "$root/sys" || return 1
    mount_in_root /dev --rbind /dev && mount --make-rslave "$root/dev" || return 1
    mount_in_root /run -t tmpfs -o mode=755 tmpfs || return 1
    mount_in_root "$work" --bind "$work" || return 1
    cp -L /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
}

# in_root COMMAND...: runs a shell command line in the root, with a clean
# environment.
in_root() {
    chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive TERM=dumb /bin/sh -c "$*"
}

# step NAME LOG COMMAND...: runs a step, PASS or FAIL with the log's tail.
step() {
    local name=$1 log=$2; shift 2
    if "$@" >"$log" 2>&1; then
        pass "$name"
        return 0
    fi
    fail "$name" "see $log"
    tail -25 "$log" | sed 's/^/    /'
    return 1
}

# ------------------------------------------------------------ phase 1: the root
stamps=$root/var/lib/goldminer-root

make_root() {
    if [ -e "$root" ]; then
        # Only an unfinished debootstrap (its debootstrap/ folder is still
        # there) or an empty directory is removed and made again.
        if [ -d "$root/debootstrap" ]; then
            echo "removing the unfinished root $root"
            rm -rf --one-file-system "$root" || return 1
        elif [ -n "$(ls -A "$root")" ]; then
            echo "package-root: $root exists, is not empty and holds no finished root ($stamps/debootstrap): remove it or pick another --root" >&2
            return 1
        fi
    fi
    debootstrap --variant=minbase --keyring=/usr/share/keyrings/debian-archive-keyring.gpg \
        "$suite" "$root" "$mirror" || return 1
    mkdir -p "$stamps" && date -u +%FT%TZ >"$stamps/debootstrap"
}

# Binary and source entries for the suite and its updates; no daemon starts on
# install (a chroot has no init; the devcluster starts its own).
configure_apt() {
    rm -f "$root/etc/apt/sources.list"
    cat >"$root/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb deb-src
URIs: $mirror
Suites: $suite $suite-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb deb-src
URIs: http://deb.debian.org/debian-security
Suites: $suite-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
    chmod 755 "$root/usr/sbin/policy-rc.d"
    printf 'APT::Install-Recommends "false";\n' >"$root/etc/apt/apt.conf.d/90goldminer-no-recommends"
}

# scripts/install-deps.sh's list under the suite's names (clang's runtime
# library carries clang's major version), what building Debian packages
# from a git clone needs and, for debian13, the suite's Slurm (smd: its
# Slurm comes from slurm_smd).
root_packages() {
    local clang_major slurm=
    clang_major=$(in_root "apt-cache depends clang" | sed -n 's/^ *Depends: clang-\([0-9][0-9]*\)$/\1/p' | head -1)
    [ -n "$clang_major" ] || { echo "package-root: cannot tell clang's version from apt-cache depends clang" >&2; return 1; }
    [ "$site" = smd ] || slurm="slurm-wlm slurmctld slurmd slurm-client libslurm-dev"
    echo "build-essential autoconf automake libtool pkg-config dpkg-dev ccache
 $slurm
 munge libmunge-dev libpam0g-dev libpmix-dev
 openmpi-bin libopenmpi-dev libucx-dev ucx-utils libhwloc-dev
 libboost-program-options-dev libgtest-dev libgmock-dev googletest
 clang libclang-rt-$clang_major-dev
 libtorch-dev python3-torch python3-torchvision python3-pybind11 python3-numpy python3-venv libdlpack-dev
 python3-pip python3-setuptools python3-wheel
 libopenblas0-pthread libjpeg62-turbo-dev
 iproute2 util-linux procps hostname jq curl
 debhelper dh-python devscripts fakeroot git ca-certificates"
}

install_packages() {
    local packages
    configure_apt || return 1
    in_root "apt-get update -q" || return 1
    packages=$(root_packages) || return 1
    # shellcheck disable=SC2086
    echo "packages:" $packages
    [ "$(cat "$stamps/packages" 2>/dev/null)" = "$packages" ] && { echo "all present"; return 0; }
    in_root "apt-get install -y -q $(echo "$packages" | tr '\n' ' ')" || return 1
    printf '%s\n' "$packages" >"$stamps/packages"
}

# debian13: trixie's slurm-wlm source, configured for its config.h, where
# scripts/install-deps.sh puts Debian 12's (/usr/local/src/goldminer). Only
# the upstream tarball (.orig, checked against the SHA-256 of trixie's signed
# Sources index) is fetched, as scripts/install-slurm-release.sh does: the
# archive's proxies here serve it but not every .dsc and .debian.tar.xz, so
# `apt-get source` fails; Debian's patches do not change the headers used.
slurm_source() {
    local ver upstream parent=/usr/local/src/goldminer tree orig file
    ver=$(in_root "dpkg-query -W -f='\${Version}' slurmctld") || return 1
    upstream=${ver#*:}
    upstream=${upstream%%-*}
    tree=$parent/slurm-wlm-$upstream
    if [ ! -f "$root$tree/config.h" ]; then
        # One line per file: 'URI' NAME SIZE SHA256:HASH
        orig=$(in_root "apt-get source -q --print-uris slurm-wlm=$ver" |
               grep "^'[^']*' slurm-wlm_[^ ]*\.orig\.tar\.[a-z0-9]* ") || {
            echo "package-root: $suite's Sources index has no .orig tarball of slurm-wlm $ver" >&2
            return 1
        }
        mkdir -p "$root$parent"
        file=$(fetch_orig "$orig" "$root$parent") || return 1
        rm -rf "$root$tree" && mkdir -p "$root$tree" &&
            tar -xf "$file" -C "$root$tree" --strip-components=1 || return 1
        in_root "cd $tree && ./configure -q --prefix=/usr --sysconfdir=/etc/slurm" || return 1
    fi
    echo "$tree" >"$stamps/slurm-src"
    echo "slurm source: $tree (slurm-wlm $ver)"
}

# smd: SchedMD's packages of the tarball's release, built in the root from
# the debian/ directory the tarball carries (its Build-Depends installed
# with apt-get build-dep), as a site without SchedMD's repository makes
# them; the .debs are kept in /var/cache/goldminer-smd (the stamp names the
# tarball's SHA-256), then the daemons, the client commands and the
# headers are installed with apt. Their plugin directory is
# /usr/lib/MULTIARCH/slurm, their configuration /etc/slurm.
smd_cache=/var/cache/goldminer-smd
smd_packages="slurm-smd slurm-smd-client slurm-smd-dev slurm-smd-slurmctld slurm-smd-slurmd"
slurm_smd_debs() {
    local sha build=/usr/local/src/goldminer/smd-build
    sha=$(sha256sum "$tarball" | cut -c1-64)
    if [ "$(cat "$stamps/smd-debs" 2>/dev/null)" = "$sha" ] && ls "$root$smd_cache"/slurm-smd_*.deb >/dev/null 2>&1; then
        echo "SchedMD's packages of $smd_version: cached in $smd_cache"
        return 0
    fi
    # fetch_schedmd_source checks the tarball against its SHA256SUMS.
    ( fetch_schedmd_source "${smd_version%.*}" "$tarball" "$root$build" ) || return 1
    in_root "cd $build/slurm-wlm-$smd_version && apt-get build-dep -y -q ./" || return 1
    "${with_build_lock[@]}" nice chroot "$root" /usr/bin/env -i \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive TERM=dumb /bin/sh -c "
        cd $build/slurm-wlm-$smd_version && dpkg-buildpackage -us -uc -b -j\$(nproc)" || return 1
    rm -rf "$root$smd_cache" && mkdir -p "$root$smd_cache" &&
        cp "$root$build"/*.deb "$root$smd_cache"/ || return 1
    rm -rf "$root$build"
    echo "$sha" >"$stamps/smd-debs"
    ls "$root$smd_cache"
}
slurm_smd_install() {
    local p f debs=
    for p in $smd_packages; do
        for f in "$root$smd_cache/${p}"_*.deb; do
            [ -f "$f" ] || { echo "package-root: no $p .deb in $smd_cache" >&2; return 1; }
            debs="$debs ${f#"$root"}"
        done
    done
    in_root "apt-get install -y -q $debs" || return 1
    in_root "dpkg-query -W $smd_packages"
}
# The release's source tree, configured as SchedMD's debian/rules configures
# it, for the select plugin's internal headers.
slurm_smd_source() {
    local parent=/usr/local/src/goldminer tree
    tree=$parent/slurm-wlm-$smd_version
    if [ ! -f "$root$tree/config.h" ]; then
        ( fetch_schedmd_source "${smd_version%.*}" "$tarball" "$root$parent" ) || return 1
        in_root "cd $tree && ./configure -q --prefix=/usr --sysconfdir=/etc/slurm --disable-debug \
            --libdir=/usr/lib/\$(dpkg-architecture -qDEB_HOST_MULTIARCH) --with-pmix" || return 1
    fi
    echo "$tree" >"$stamps/slurm-src"
    echo "slurm source: $tree (SchedMD's slurm-$smd_version)"
}

# The build under `flock GOLDMINER_BUILD_LOCK` when that is set.
with_build_lock=()
[ -z "${GOLDMINER_BUILD_LOCK:-}" ] || with_build_lock=(flock "$GOLDMINER_BUILD_LOCK")

echo "$site: root $root, work $work, port base $port_base"
phase1_start=$(date +%s)
if [ -f "$stamps/debootstrap" ]; then
    pass "root (debootstrap $suite, cached since $(cat "$stamps/debootstrap"))"
else
    step "root (debootstrap $suite)" "$logs/debootstrap.log" make_root || finish
fi
mount_root || { fail mounts "cannot mount /proc, /sys, /dev, /run or $work in $root"; finish; }
step "root packages" "$logs/packages.log" install_packages || finish
if [ "$site" = smd ]; then
    step "SchedMD's slurm-smd packages of $smd_version (dpkg-buildpackage)" "$logs/smd-debs.log" slurm_smd_debs || finish
    step "SchedMD's packages installed ($smd_packages)" "$logs/smd-install.log" slurm_smd_install || finish
    step "slurm source tree" "$logs/slurm-source.log" slurm_smd_source || finish
else
    step "slurm source tree" "$logs/slurm-source.log" slurm_source || finish
fi
echo "$site: phase 1 (the root) took $(( $(date +%s) - phase1_start )) s"
if [ "$root_only" = yes ]; then
    finish
fi

# ------------------------------------------------------------ phase 2: build and test
phase2_start=$(date +%s)
slurm_src=$(cat "$stamps/slurm-src")
clone=$work/src

clone_source() {
    rm -rf "$clone" && git clone -q --no-hardlinks "$src" "$clone" &&
        git -C "$clone" log -1 --format='commit %h %s'
}
build_deps() {
    in_root "cd $clone && apt-get build-dep -y -q ./"
}
# debian13: `make deb`. smd: as a clean-room build (sbuild, pbuilder) does,
# from the source package `make debsrc` makes, with the release's tarball
# as its orig-slurm component: extracted with dpkg-source and built with
# dpkg-buildpackage alone (Build-Depends checked, no GM_* from make).
build_debs() {
    local target="make -j\$(nproc) deb"
    if [ "$site" = smd ]; then
        cp "$tarball" "$work/" || return 1
        target="make debsrc SLURM_TARBALL=$work/${tarball##*/}
        cd deb-src && dpkg-source -x ./*.dsc pkg && cd pkg
        DEB_BUILD_OPTIONS=nocheck dpkg-buildpackage -us -uc -b -j\$(nproc)"
    fi
    "${with_build_lock[@]}" nice chroot "$root" /usr/bin/env -i \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive TERM=dumb /bin/sh -c "
        set -e
        cd $clone
        autoreconf -fi >/dev/null
        mkdir -p build && cd build
        ../configure --with-slurm=/usr --with-slurm-src=$slurm_src
        $target"
}

step "clone $(git -C "$src" rev-parse --short HEAD)" "$logs/clone.log" clone_source || finish
if [ -n "$prebuilt" ]; then
    debs=$prebuilt
    echo "$site: testing the .debs of $debs (not built by this run)"
else
    if [ ! -f "$clone/debian/control" ]; then
        fail "make deb" "$src's HEAD has no debian/control (make deb not committed yet)"
        finish
    fi
    step "Build-Depends installable on $suite (apt-get build-dep)" "$logs/build-dep.log" build_deps || finish
    step "$([ "$site" = smd ] && echo "make debsrc, dpkg-buildpackage of the .dsc" || echo "make deb") (Slurm $(in_root "slurmctld -V"))" \
        "$logs/make-deb.log" build_debs || finish
    debs=$work/debs
    rm -rf "$debs" && mkdir -p "$debs"
    find "$clone" -maxdepth 3 -name '*.deb' -newer "$logs/clone.log" -exec cp {} "$debs"/ \;
    ls "$debs"/*.deb >/dev/null 2>&1 || { fail "make deb" "no .deb under $clone after make deb"; finish; }
    echo "$site: phase 2 build took $(( $(date +%s) - phase2_start )) s; packages:"
    find "$debs" -name '*.deb' -printf '    %f\n' | sort
fi

test_start=$(date +%s)
if [ ! -x "$clone/tests/packages/test-debs.sh" ]; then
    fail "test-debs.sh" "$src's HEAD has no tests/packages/test-debs.sh"
    finish
fi
only_arg=
[ -z "$only" ] || only_arg="--only $(printf '%q' "$only")"
in_root "cd $clone && tests/packages/test-debs.sh --state-dir $work/itest --port-base $port_base $only_arg $debs" \
    2>&1 | tee "$logs/test-debs.log"
# Its own PASS/FAIL/SKIP lines count into this tally.
read -r p f s < <(sed -n 's/^packages: \([0-9]*\) passed, \([0-9]*\) failed, \([0-9]*\) skipped.*/\1 \2 \3/p' \
    "$logs/test-debs.log" | tail -1)
if [ -n "${p:-}" ]; then
    passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
else
    fail "test-debs.sh" "no tally line; see $logs/test-debs.log"
fi
echo "$site: phase 2 tests took $(( $(date +%s) - test_start )) s"
[ "$keep" = yes ] || rm -rf "$clone"
finish
