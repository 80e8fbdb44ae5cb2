# shellcheck shell=sh
#
# Builds and installs a Slurm release other than Debian 12's own from
# the upstream tarball of Debian's slurm-wlm source package in a later
# suite (24.11: trixie, 26.05: sid), for install-deps.sh --slurm RELEASE.
#
# The package index comes through apt with a private configuration
# (its own sources list, lists and cache under /var/lib/goldminer), so the
# machine's own apt sources never see the later suite and `apt-get install`
# keeps installing bookworm's packages. The source tree is configured for
# the prefix, built and installed from where it stays: the select plugin
# builds against its config.h and src/ headers, as on 22.05.
#
# Each step is skipped when done: the download when the tree exists, the
# configure when its config.status is for this prefix, build and install
# when PREFIX/sbin/slurmctld is the tree's version.
#
# Sourced by install-deps.sh, which provides say() and die().

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

# fetch_slurm_source RELEASE SUITE SRC_PARENT: unpacks the upstream
# tarball of SUITE's slurm-wlm source package (its .orig.tar.gz, checked
# against the SHA-256 in SUITE's signed Sources index) under SRC_PARENT
# as slurm-wlm-VERSION and prints VERSION; refuses another release.
# Debian's patches are not applied: only the tarball is fetched, which is
# also all that some mirrors and proxies serve from the pool.
fetch_slurm_source() {
    _dir=/var/lib/goldminer/apt-$2
    mkdir -p "$_dir/lists/partial" "$_dir/cache/archives/partial" "$3"
    printf 'deb-src http://deb.debian.org/debian %s main\n' "$2" >"$_dir/sources.list"
    slurm_apt "$2" update >"$_dir/update.out" 2>&1 || {
        tail -5 "$_dir/update.out" >&2
        die "apt-get update for Debian $2's sources failed (full output: $_dir/update.out)"
    }
    # One line per file: 'URI' NAME SIZE SHA256:HASH
    _orig=$(slurm_apt "$2" source --print-uris slurm-wlm 2>/dev/null |
            grep "^'[^']*' slurm-wlm_[^ ]*\.orig\.tar\.[a-z0-9]* ") ||
        die "Debian $2 has no slurm-wlm source package with an .orig tarball (apt-get source --print-uris slurm-wlm with $_dir/sources.list)"
    _uri=$(printf '%s\n' "$_orig" | sed "s/^'\([^']*\)'.*/\1/")
    _file=$(printf '%s\n' "$_orig" | awk '{ print $2 }')
    _sha=$(printf '%s\n' "$_orig" | sed -n 's/.* SHA256:\([0-9a-f]*\)$/\1/p')
    _upstream=${_file#slurm-wlm_}
    _upstream=${_upstream%.orig.tar.*}
    case $_upstream in
        "$1".*) ;;
        *) die "Debian $2's slurm-wlm is $_upstream, not Slurm $1: this script's release table (install-deps.sh SLURM_RELEASES) needs updating" ;;
    esac
    [ -n "$_sha" ] || die "no SHA256 for $_file in Debian $2's Sources index"
    if [ ! -d "$3/slurm-wlm-$_upstream" ]; then
        if ! printf '%s  %s\n' "$_sha" "$3/$_file" | sha256sum -c --status 2>/dev/null; then
            say "downloading Slurm $_upstream ($_uri)" >&2
            if ! curl -fsSL --retry 3 -o "$3/$_file.part" "$_uri"; then
                rm -f "$3/$_file.part"
                # A mirror may lag its own index: an upstream tree of
                # the same release unpacked there by hand will do.
                _local=$(ls -d "$3/slurm-wlm-$1".* 2>/dev/null | sort -V | tail -n 1)
                [ -n "$_local" ] ||
                    die "download of $_uri into $3 failed; to build from SchedMD's tarball instead, unpack slurm-$1.N.tar.bz2 as $3/slurm-wlm-$1.N and run this again"
                say "download of $_uri failed: using the Slurm $1 source tree already there, $_local" >&2
                printf '%s\n' "${_local##*/slurm-wlm-}"
                return 0
            fi
            printf '%s  %s\n' "$_sha" "$3/$_file.part" | sha256sum -c --status ||
                die "$_uri: SHA-256 differs from Debian $2's Sources index ($_sha)"
            mv "$3/$_file.part" "$3/$_file"
        fi
        rm -rf "$3/slurm-wlm-$_upstream.part"
        mkdir "$3/slurm-wlm-$_upstream.part"
        tar -xf "$3/$_file" -C "$3/slurm-wlm-$_upstream.part" --strip-components=1 ||
            die "cannot unpack $3/$_file"
        mv "$3/slurm-wlm-$_upstream.part" "$3/slurm-wlm-$_upstream"
    fi
    printf '%s\n' "$_upstream"
}

# install_slurm_release RELEASE SUITE PREFIX SRC_PARENT
install_slurm_release() {
    _release=$1 _suite=$2 _prefix=$3 _parent=$4
    _have=$(slurm_version_of "$_prefix") || _have=
    case $_have in
        "$_release".*)
            if [ -f "$_parent/slurm-wlm-$_have/config.h" ]; then
                say "Slurm $_have present: $_prefix (source: $_parent/slurm-wlm-$_have)"
                return 0
            fi ;;
    esac

    _version=$(fetch_slurm_source "$_release" "$_suite" "$_parent")
    _tree=$_parent/slurm-wlm-$_version
    cd "$_tree"
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
