# shellcheck shell=sh
#
# Builds and installs a Slurm release other than Debian 12's own into
# PREFIX, for install-deps.sh --slurm RELEASE. The source is, in order:
#  - a SchedMD release tarball given with --slurm-source FILE;
#  - the upstream tarball of Debian's slurm-wlm source package in the
#    suite that carries the release (24.11: trixie, 26.05: sid), when the
#    archive serves it;
#  - SchedMD's tarball of that release in ../shared/slurm/ beside the
#    checkout (the default SLURM_SOURCE_DIR), when one is there.
# Every tarball is checked: Debian's against the SHA-256 of its signed
# Sources index, SchedMD's against a SHA256SUMS file beside it or, for the
# releases named in SCHEDMD_SHA256 below, the checksum SchedMD published.
#
# The package index comes through apt with a private configuration
# (its own sources list, lists and cache under /var/lib/goldminer), so the
# machine's own apt sources never see the later suite and `apt-get install`
# keeps installing bookworm's packages. The source tree (SRC_PARENT/
# slurm-wlm-VERSION, whichever tarball it came from) is configured for
# the prefix, built and installed from where it stays: the select plugin
# builds against its config.h and src/ headers, as on 22.05.
#
# Each step is skipped when done: the download when the tree exists, the
# configure when its config.status is for this prefix, build and install
# when PREFIX/sbin/slurmctld is the tree's version.
#
# Sourced by install-deps.sh, which provides say() and die().

# SchedMD's release tarballs this script knows the SHA-256 of (as listed
# in ../shared/slurm/SHA256SUMS), for a tarball with no SHA256SUMS beside it.
readonly SCHEDMD_SHA256="
slurm-25.11.7.tar.xz e601de05cfc3369f1b7fb612cd2fd47e753b35b8ae9855d9733d36b047ceca92
slurm-26.05.3.tar.xz 395c99720f008fea253600e19a1f2798df3b5db67f40689cee2eb39d86411b13
"

# Where PMIx's development files are on Debian (libpmix-dev).
readonly SLURM_PMIX_DIR=/usr/lib/x86_64-linux-gnu/pmix2

# slurm_version_of PREFIX: "24.11.5" if PREFIX holds an installed Slurm.
slurm_version_of() {
    [ -x "$1/sbin/slurmctld" ] || return 1
    "$1/sbin/slurmctld" -V 2>/dev/null | sed -n 's/^slurm[^ ]* \([0-9][0-9.]*\).*/\1/p'
}

# slurm_apt SUITE ARGS...: apt-get on the private configuration of SUITE.
slurm_apt() {
    _suite=$1; shift
    _dir=/var/lib/goldminer/apt-$_suite
    apt-get -q \
        -o Dir::Etc::SourceList="$_dir/sources.list" \
        -o Dir::Etc::SourceParts=/nonexistent \
        -o Dir::State::Lists="$_dir/lists" \
        -o Dir::Cache="$_dir/cache" \
        -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache= \
        -o APT::Sandbox::User=root "$@"
}

# unpack_slurm_tree TARBALL VERSION SRC_PARENT: unpacks TARBALL (one
# top directory) as SRC_PARENT/slurm-wlm-VERSION, unless it is there.
unpack_slurm_tree() {
    [ ! -d "$3/slurm-wlm-$2" ] || return 0
    rm -rf "$3/slurm-wlm-$2.part"
    mkdir -p "$3/slurm-wlm-$2.part"
    tar -xf "$1" -C "$3/slurm-wlm-$2.part" --strip-components=1 ||
        die "cannot unpack $1 into $3/slurm-wlm-$2.part"
    mv "$3/slurm-wlm-$2.part" "$3/slurm-wlm-$2"
}

# fetch_orig ORIG DIR: the tarball that ORIG, a line of `apt-get source
# --print-uris` ('URI' NAME SIZE SHA256:HASH), names, downloaded into DIR
# unless a copy with that SHA-256 is there, checked against it; prints its
# path. Returns 1, saying why, when the download fails.
fetch_orig() {
    _o_uri=$(printf '%s\n' "$1" | sed "s/^'\([^']*\)'.*/\1/")
    _o_file=$(printf '%s\n' "$1" | awk '{ print $2 }')
    _o_sha=$(printf '%s\n' "$1" | sed -n 's/.* SHA256:\([0-9a-f]*\)$/\1/p')
    [ -n "$_o_sha" ] || die "no SHA256 for $_o_file in the Sources index"
    if ! printf '%s  %s\n' "$_o_sha" "$2/$_o_file" | sha256sum -c --status 2>/dev/null; then
        say "downloading $_o_uri" >&2
        if ! curl -fsSL --retry 3 -o "$2/$_o_file.part" "$_o_uri"; then
            rm -f "$2/$_o_file.part"
            say "download of $_o_uri failed" >&2
            return 1
        fi
        printf '%s  %s\n' "$_o_sha" "$2/$_o_file.part" | sha256sum -c --status ||
            die "$_o_uri: SHA-256 differs from the Sources index ($_o_sha)"
        mv "$2/$_o_file.part" "$2/$_o_file"
    fi
    printf '%s\n' "$2/$_o_file"
}

# fetch_debian_source RELEASE SUITE SRC_PARENT: unpacks the upstream
# tarball of SUITE's slurm-wlm source package (its .orig.tar.gz, checked
# against the SHA-256 in SUITE's signed Sources index) under SRC_PARENT
# as slurm-wlm-VERSION and prints VERSION. Returns 1, saying why, when
# the archive has no such package of RELEASE or does not serve it.
# Debian's patches are not applied: only the tarball is fetched, which is
# also all that some mirrors and proxies serve from the pool.
fetch_debian_source() {
    _dir=/var/lib/goldminer/apt-$2
    mkdir -p "$_dir/lists/partial" "$_dir/cache/archives/partial" "$3"
    printf 'deb-src http://deb.debian.org/debian %s main\n' "$2" >"$_dir/sources.list"
    if ! slurm_apt "$2" update >"$_dir/update.out" 2>&1; then
        tail -5 "$_dir/update.out" >&2
        say "apt-get update for Debian $2's sources failed (full output: $_dir/update.out)" >&2
        return 1
    fi
    # One line per file: 'URI' NAME SIZE SHA256:HASH
    _orig=$(slurm_apt "$2" source --print-uris slurm-wlm 2>/dev/null |
            grep "^'[^']*' slurm-wlm_[^ ]*\.orig\.tar\.[a-z0-9]* ") || {
        say "Debian $2 has no slurm-wlm source package with an .orig tarball" >&2
        return 1
    }
    _file=$(printf '%s\n' "$_orig" | awk '{ print $2 }')
    _upstream=${_file#slurm-wlm_}
    _upstream=${_upstream%.orig.tar.*}
    case $_upstream in
        "$1".*) ;;
        *) say "Debian $2's slurm-wlm is $_upstream, not Slurm $1 (install-deps.sh SLURM_RELEASES names the suite)" >&2
           return 1 ;;
    esac
    if [ ! -d "$3/slurm-wlm-$_upstream" ]; then
        fetch_orig "$_orig" "$3" >/dev/null || {
            say "Debian $2 lists slurm-wlm $_upstream but does not serve it here" >&2
            return 1
        }
        unpack_slurm_tree "$3/$_file" "$_upstream" "$3"
    fi
    printf '%s\n' "$_upstream"
}

# schedmd_tarball RELEASE DIR: the newest slurm-RELEASE.N.tar.* in DIR.
schedmd_tarball() {
    # shellcheck disable=SC2012  # SchedMD names: no odd characters
    ls -d "$2/slurm-$1".[0-9]*.tar.* 2>/dev/null | sort -V | tail -n 1
}

# fetch_schedmd_source RELEASE TARBALL SRC_PARENT: checks SchedMD's
# release tarball TARBALL (slurm-RELEASE.N.tar.{bz2,xz,gz}) against a
# SHA256SUMS beside it or SCHEDMD_SHA256, unpacks it under SRC_PARENT as
# slurm-wlm-RELEASE.N and prints RELEASE.N.
fetch_schedmd_source() {
    [ -f "$2" ] || die "--slurm-source: $2: no such file"
    _file=${2##*/}
    _version=${_file#slurm-}
    _version=${_version%.tar.*}
    case $_version in
        "$1".[0-9]*) ;;
        *) die "--slurm-source: $2 is not a SchedMD tarball of Slurm $1 (expected slurm-$1.N.tar.bz2, .tar.xz or .tar.gz)" ;;
    esac
    _sums=${2%/*}/SHA256SUMS
    [ "$_sums" != "$2/SHA256SUMS" ] || _sums=./SHA256SUMS
    _sha=$(awk -v f="$_file" '$2 == f || $2 == "*" f { print $1 }' "$_sums" 2>/dev/null)
    [ -n "$_sha" ] || _sha=$(printf '%s\n' "$SCHEDMD_SHA256" | awk -v f="$_file" '$1 == f { print $2 }')
    [ -n "$_sha" ] ||
        die "--slurm-source: no checksum for $_file: put SchedMD's published SHA-256 for it in a SHA256SUMS file beside it ('HASH  $_file')"
    if [ ! -d "$3/slurm-wlm-$_version" ]; then
        say "checking $2 (SHA-256 $_sha)" >&2
        printf "%s  %s\n" "$_sha" "$2" | sha256sum -c --status 2>/dev/null ||
            die "--slurm-source: $2: SHA-256 is not $_sha (a corrupt or different file; download it again from https://download.schedmd.com/slurm/)"
        mkdir -p "$3"
        unpack_slurm_tree "$2" "$_version" "$3"
    fi
    printf '%s\n' "$_version"
}

# slurm_source RELEASE SUITE SRC_PARENT SOURCE SOURCE_DIR: the source
# tree's VERSION, from SOURCE (a SchedMD tarball; empty: none given), else
# Debian's SUITE (empty: none carries RELEASE), else SOURCE_DIR's tarball.
slurm_source() {
    if [ -n "$4" ]; then
        fetch_schedmd_source "$1" "$4" "$3"
        return
    fi
    if [ -n "$2" ] && fetch_debian_source "$1" "$2" "$3"; then
        return 0
    fi
    _tarball=$(schedmd_tarball "$1" "$5")
    if [ -n "$_tarball" ]; then
        say "using SchedMD's $_tarball" >&2
        fetch_schedmd_source "$1" "$_tarball" "$3"
        return
    fi
    _from="no Debian suite carries it"
    [ -z "$2" ] || _from="Debian $2 does not serve it here"
    die "no source for Slurm $1: $_from and $5 has no slurm-$1.N.tar.* ; download SchedMD's release from https://download.schedmd.com/slurm/ (slurm-$1.N.tar.bz2) with its SHA-256 and pass --slurm-source FILE"
}

# install_slurm_release RELEASE SUITE PREFIX SRC_PARENT SOURCE SOURCE_DIR
# (SUITE, SOURCE: empty for none; see slurm_source)
install_slurm_release() {
    _release=$1 _suite=$2 _prefix=$3 _parent=$4
    _have=$(slurm_version_of "$_prefix") || _have=
    _want="$_release.*"
    if [ -n "$5" ]; then  # that tarball's micro release, no other
        _want=${5##*/slurm-}
        _want=${_want%.tar.*}
    fi
    # shellcheck disable=SC2254  # _want is a pattern
    case $_have in
        $_want)
            if [ -f "$_parent/slurm-wlm-$_have/config.h" ]; then
                say "Slurm $_have present: $_prefix (source: $_parent/slurm-wlm-$_have)"
                return 0
            fi ;;
    esac

    _version=$(slurm_source "$_release" "$_suite" "$_parent" "$5" "$6")
    _tree=$_parent/slurm-wlm-$_version
    cd "$_tree" || die "cannot enter $_tree"
    if ! grep -q -- "'--prefix=$_prefix'" config.status 2>/dev/null ||
       [ ! -f config.h ]; then
        _pmix=
        [ ! -f "$SLURM_PMIX_DIR/include/pmix.h" ] || _pmix=--with-pmix=$SLURM_PMIX_DIR
        say "configuring Slurm $_version for $_prefix in $_tree"
        # --enable-multiple-slurmd: the devcluster runs several slurmd on
        # one machine; the REST daemon is not needed and not built.
        # shellcheck disable=SC2086  # $_pmix: empty or one word
        nice -n 19 ./configure -q --prefix="$_prefix" --sysconfdir="$_prefix/etc" \
            --enable-multiple-slurmd --disable-slurmrestd --with-munge=/usr \
            $_pmix >configure.out 2>&1 || {
            tail -20 configure.out >&2
            die "Slurm $_version configure failed in $_tree (full output: $_tree/configure.out)"
        }
    fi
    say "building Slurm $_version in $_tree (make.out there)"
    nice -n 19 make -j"$(nproc)" >make.out 2>&1 || {
        tail -30 make.out >&2
        die "Slurm $_version build failed in $_tree (full output: $_tree/make.out)"
    }
    nice -n 19 make install >install.out 2>&1 || {
        tail -30 install.out >&2
        die "Slurm $_version install into $_prefix failed (full output: $_tree/install.out)"
    }
    _have=$(slurm_version_of "$_prefix") || _have=
    [ "$_have" = "$_version" ] ||
        die "after installing, $_prefix/sbin/slurmctld -V says '${_have:-nothing}', not $_version"
    _pmix=without
    [ ! -f "$_prefix/lib/slurm/mpi_pmix.so" ] || _pmix=with
    say "Slurm $_version installed in $_prefix ($_pmix PMIx; source: $_tree)"
}
