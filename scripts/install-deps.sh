#!/bin/sh
# Installs every Debian package that the build, the demo, the tests and the
# documented build commands (./configure && make, make deb, make rpm) need,
# plus Slurm's source tree (internal headers for the select plugin).
# The packages come from two places that cannot drift apart:
#   - debian/control's Build-Depends (every build profile, so the check
#     suite's python3-torch and munge too), installed with
#     `apt-get build-dep` on this tree whenever dpkg-checkbuilddeps finds
#     one unmet;
#   - the list below: only what the control file does not name (the
#     compilers' extras, Slurm's daemons and commands, the tools the test
#     command, the demo and the packaging checks run).
# scripts/fresh-check runs this script in a pristine Debian 12 root and
# checks that every program those commands call is then present.
# Idempotent: a second run installs nothing and re-uses the source tree.
#
# Usage: scripts/install-deps.sh [--slurm RELEASE [--slurm-source FILE]]
#                                [SLURM_SRC_PARENT]
#   --slurm RELEASE   also build and install that Slurm release (24.11,
#                     25.11, 26.05) into /opt/slurm-RELEASE, with munge
#                     and PMIx; its configured source tree stays in
#                     SLURM_SRC_PARENT for the select plugin's headers.
#                     Skipped when the prefix already holds that release.
#                     The source: Debian's slurm-wlm source package where
#                     a suite carries the release and the archive serves it
#                     (24.11: Debian 13 "trixie"; 26.05: unstable "sid"),
#                     else SchedMD's release tarball in ../shared/slurm/
#                     beside the checkout (checked against its SHA256SUMS).
#                     Without --slurm: Debian 12's Slurm 22.05 packages and
#                     their source tree.
#   --slurm-source FILE
#                     build from this SchedMD release tarball
#                     (slurm-RELEASE.N.tar.bz2|xz|gz, checked against a
#                     SHA256SUMS beside it or the checksums this script
#                     knows) instead.
#   SLURM_SRC_PARENT  where Slurm source trees are unpacked
#                     (default: /usr/local/src/goldminer)
set -eu

say() { printf 'install-deps: %s\n' "$*"; }
die() { say "$*" >&2; exit 1; }

# release|Debian suite whose slurm-wlm source package carries it (-: none)
readonly SLURM_RELEASES="24.11|trixie 25.11|- 26.05|sid"
# Where SchedMD's release tarballs are looked for by default.
slurm_source_dir=$(cd "$(dirname "$0")/../.." && pwd)/shared/slurm
usage="usage: install-deps.sh [--slurm RELEASE [--slurm-source FILE]] [SLURM_SRC_PARENT]"

release=
source=
while [ $# -gt 0 ]; do
    case $1 in
        --slurm)
            [ $# -ge 2 ] || die "--slurm: missing value (one of: 22.05 24.11 25.11 26.05)"
            release=$2; shift 2 ;;
        --slurm=*) release=${1#--slurm=}; shift ;;
        --slurm-source)
            [ $# -ge 2 ] || die "--slurm-source: missing value (a SchedMD tarball, slurm-RELEASE.N.tar.bz2)"
            source=$2; shift 2 ;;
        --slurm-source=*) source=${1#--slurm-source=}; shift ;;
        -*) die "unknown option '$1' ($usage)" ;;
        *) break ;;
    esac
done
[ "$release" != 22.05 ] || release=   # Debian 12's own: the default
[ -z "$source" ] || [ -n "$release" ] ||
    die "--slurm-source needs --slurm RELEASE (22.05 is Debian 12's packages) ($usage)"
suite=
if [ -n "$release" ]; then
    for r in $SLURM_RELEASES; do
        [ "${r%%|*}" != "$release" ] || suite=${r#*|}
    done
    [ -n "$suite" ] || die "--slurm: invalid value '$release': supported releases are 22.05 (the default, Debian 12's packages), 24.11, 25.11 and 26.05"
    [ "$suite" != - ] || suite=
    case $source in
        ''|/*) ;;
        *) source=$(pwd)/$source ;;
    esac
fi

src_parent=${1:-/usr/local/src/goldminer}

if [ "$(id -u)" -ne 0 ]; then
    say "must run as root (apt-get install)" >&2
    exit 1
fi

packages="
 build-essential autoconf automake libtool pkg-config dpkg-dev ccache
 slurm-wlm slurmctld slurmd slurm-client
 libpam0g-dev libpmix-dev ucx-utils
 googletest clang libclang-rt-14-dev
 python3-torchvision python3-numpy python3-venv ninja-build python3-pytest
 python3-pip python3-setuptools python3-wheel
 libopenblas0-pthread
 iproute2 util-linux procps nftables
 jq curl
 lintian rpm rpmlint debootstrap
 makeself libbsd-dev squashfs-tools squashfuse fuse-overlayfs parallel zstd
 charliecloud-runtime
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

# debian/control's build dependencies (make deb's, and the library headers
# that ./configure looks for): apt resolves the control file itself.
top=$(cd "$(dirname "$0")/.." && pwd)
if dpkg-checkbuilddeps "$top/debian/control" >/dev/null 2>&1; then
    say "build dependencies of debian/control present"
else
    say "installing debian/control's build dependencies: $(dpkg-checkbuilddeps "$top/debian/control" 2>&1 | sed 's/.*Unmet build dependencies: //')"
    [ -n "$missing" ] || apt-get update -q
    apt-get build-dep -y -q --no-install-recommends "$top" ||
        die "apt-get build-dep $top failed (the Build-Depends of $top/debian/control)"
    dpkg-checkbuilddeps "$top/debian/control" ||
        die "build dependencies still unmet after apt-get build-dep (debian/control)"
fi

if [ -n "$release" ]; then
    # shellcheck source=scripts/install-slurm-release.sh
    . "$(dirname "$0")/install-slurm-release.sh"
    install_slurm_release "$release" "$suite" "/opt/slurm-$release" "$src_parent" \
        "$source" "$slurm_source_dir"
    exit 0
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
