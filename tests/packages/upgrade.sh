# shellcheck shell=bash
# The upgrade check of test-debs.sh (sourced by it; uses its pass, fail,
# $work, ${debs[@]} and ${packages[@]}): the installed packages are
# upgraded to a rebuild of themselves, as apt finds one in a site's
# repository. The rebuild is each .deb repacked with the version `make
# deb` gives a later build of the same tree (its +bSTAMP one higher) and
# the exact dependencies among them to match; the repository is a local
# one (dpkg-scanpackages), seen through apt options only (its own source
# list and lists directory: the system's apt configuration is untouched).
# Checked: apt-get install --only-upgrade picks every package's rebuild,
# and afterwards srun runs on every node of the devcluster that
# removal_check then uses (STATE, PORT), slurmctld answering.

# shellcheck disable=SC2154  # work, debs, packages: test-debs.sh's

# The version a later rebuild of VERSION gets.
upgrade_rebuilt_version() {
    case $1 in
        *+b[0-9]*) echo "${1%+b*}+b$(( ${1##*+b} + 1 ))" ;;
        *) echo "$1+b1" ;;
    esac
}

# upgrade_check: the check; leaves the rebuild installed.
upgrade_check() {
    local repo=$work/repo f dir old new p got apt_opts out
    mkdir -p "$repo" "$work/lists/partial" "$work/repack" || { fail upgrade "cannot make $repo"; return; }
    old=$(dpkg-deb -f "${debs[0]}" Version)
    new=$(upgrade_rebuilt_version "$old")
    for f in "${debs[@]}"; do
        dir=$work/repack/$(basename "$f" .deb)
        rm -rf "$dir"
        dpkg-deb -R "$f" "$dir" || { fail upgrade "dpkg-deb -R $f"; return; }
        sed -i -e "s/^Version: .*/Version: $new/" -e "s/(= $old)/(= $new)/g" "$dir/DEBIAN/control"
        dpkg-deb --root-owner-group -b "$dir" "$repo/" >/dev/null || { fail upgrade "dpkg-deb -b $dir"; return; }
    done
    (cd "$repo" && dpkg-scanpackages -m . /dev/null >Packages 2>/dev/null) || { fail upgrade "dpkg-scanpackages"; return; }
    echo "deb [trusted=yes] file:$repo ./" >"$work/repo.list"
    apt_opts=(-o "Dir::Etc::SourceList=$work/repo.list" -o Dir::Etc::SourceParts=- -o "Dir::State::Lists=$work/lists")
    if ! apt-get "${apt_opts[@]}" update >"$work/upgrade-update.out" 2>&1 ||
        ! apt-get "${apt_opts[@]}" install -y --only-upgrade "${packages[@]}" >"$work/upgrade.out" 2>&1; then
        fail upgrade "apt-get: $(tail -3 "$work/upgrade-update.out" "$work/upgrade.out" | tr '\n' '|')"
        return
    fi
    for p in "${packages[@]}"; do
        got=$(dpkg-query -W -f='${Version}' "$p" 2>/dev/null)
        [ "$got" = "$new" ] || { fail upgrade "$p is $got after the upgrade, not the rebuild's $new"; return; }
    done
    pass "upgrade_apt_picks_the_rebuild ($old -> $new, ${#packages[@]} packages)"
}

# upgrade_then_srun STATE PORT: upgrade_check with the devcluster up (as
# a site upgrades under running daemons), then srun on every node.
upgrade_then_srun() {
    local out
    removal_up upgrade "$1" "$2" || return
    upgrade_check
    out=$(removal_srun_everywhere) || { fail upgrade "after the upgrade: $out"; removal_down; return; }
    timeout 10 scontrol ping 2>/dev/null | grep -q 'is UP' || { fail upgrade "slurmctld does not answer after the upgrade"; removal_down; return; }
    pass "upgrade_leaves_srun_running_on_every_node"
    removal_down
}
