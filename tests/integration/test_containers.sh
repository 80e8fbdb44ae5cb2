# `--goldminer` jobs whose trainer runs in a container: pyxis 0.24.0 over
# enroot 4.1.2 (built by scripts/container-tools; run.sh puts enroot on
# slurmd's PATH) and Debian's Charliecloud (ch-run), with the test image of
# scripts/container-image: Debian 12's python3 with torch 2.x from PyPI and
# a module only the image has (gm_image_only_module), no goldminer. The
# goldminer package pip installed for that python (BUILD/python-torch2,
# scripts/run-tests) is mounted at /opt/goldminer/python; the trainer
# script is tests/integration/container_job.py.
# pyxis is added to plugstack.conf by each test (slurmstepd, srun and
# sbatch read it anew) and the file restored after, so the other tests run
# without it. The jobs name their container after the image
# (--container-name, pyxis container_scope=global): the first job unpacks
# the image (5.5 GB, under the cluster's STATE_DIR/containers/enroot), every
# later job and later run reuses it; one of another image is removed. The
# jobs have enroot's bin first on PATH: the workers' goldminer-dw runs
# `enroot` from its PATH. Each test skips saying why when user
# namespaces, the tools, the image or the package are not to be had.

# The things every container test needs, or a line saying which is missing
# and status 77 (skipped).
containers_ready() {
    requires_build_tree "the goldminer package pip installed for the image python (BUILD/python-torch2)" || return
    [ -n "$container_prefix" ] || { echo "no enroot/pyxis: $container_note"; return 77; }
    if ! unshare -U -r true 2>/dev/null; then
        echo "user namespaces are unavailable here (unshare -U -r fails): enroot and ch-run need them"
        return 77
    fi
    if [ -z "$container_image" ] || [ ! -f "$container_image" ] || [ ! -d "${container_image%/*}/root" ]; then
        echo "no test image '$container_image' (scripts/container-image makes it; scripts/run-tests names it in GOLDMINER_TEST_CONTAINER_IMAGE)"
        return 77
    fi
    if [ ! -f "$build/python-torch2/goldminer/__init__.py" ]; then
        echo "no goldminer package for the image python in $build/python-torch2 (scripts/run-tests pip installs it there)"
        return 77
    fi
    if /usr/bin/python3 -c 'import gm_image_only_module' 2>/dev/null; then
        echo "the host python3 imports gm_image_only_module: the test cannot tell the image from the host"
        return 1
    fi
}

# The torch.__version__ of the image's torch (PyPI's: "2.15.0+cu132").
image_torch_version() {
    sed -n "s/^__version__ = '\(.*\)'\$/\1/p" "${container_image%/*}/root/usr/local/lib/python3.11/dist-packages/torch/version.py"
}

# with_pyxis first|last: plugstack.conf gets pyxis (its named containers
# kept between jobs) before or after our plugin until this test's shell
# exits (a second call changes the order); then the file is restored.
# Removes the containers the tests named after another image.
with_pyxis() {
    local conf="$state/etc/plugstack.conf" line
    line="required $container_prefix/lib/slurm/spank_pyxis.so container_scope=global"
    if [ -z "${pyxis_saved-}" ]; then
        cp "$conf" "$work/plugstack.conf.containers" || return 1
        pyxis_saved=yes
        trap 'cp "$work/plugstack.conf.containers" "'"$conf"'"' EXIT
        remove_stale_containers
    fi
    if [ "$1" = first ]; then
        { echo "$line"; grep -v '^#' "$work/plugstack.conf.containers"; } >"$conf"
    else
        { grep -v '^#' "$work/plugstack.conf.containers"; echo "$line"; } >"$conf"
    fi
}

# The name the tests give their container: the image's cache key
# (scripts/container-image's image-KEY); pyxis prefixes "pyxis_".
container_name() {
    local dir=${container_image%/*}
    echo "gmtest-${dir##*/image-}"
}

remove_stale_containers() {
    local name
    for name in $(PATH=$container_prefix/bin:$PATH enroot list 2>/dev/null); do
        case $name in
            "pyxis_$(container_name)") ;;
            pyxis_gmtest-*) PATH=$container_prefix/bin:$PATH enroot remove -f "$name" >/dev/null 2>&1 ;;
        esac
    done
}

# The --container-mounts of the tests: the package, the tests' scripts and
# files and munged's socket directory, each at its host path (the workers
# open the CSV a Session names and the trainer's script on the host, and
# the job's GOLDMINER_MUNGE_SOCKET names the host path), the package at
# /opt/goldminer/python.
container_mounts() {
    echo "$build/python-torch2:/opt/goldminer/python,$integration_dir:$integration_dir,$work:$work,$state/munge:$state/munge"
}

# Submits a `sbatch --goldminer=dw=2` job named NAME whose host batch
# script runs `srun --container-image=IMAGE --container-mounts=...
# --container-name=... python3 SCRIPT ARGS` (SCRIPT in
# tests/integration); prints its output (kept in $work/NAME.JOBID), or
# says why the submission failed and fails.
run_pyxis_trainer_job() {
    local name=$1 script=$2 job minutes=${job_minutes:-4}
    shift 2
    job=$(
        if nodes_have_namespaces; then unset UCX_NET_DEVICES; fi
        export PYTHONPATH=/opt/goldminer/python PATH=$container_prefix/bin:$PATH
        timeout $((minutes * 60 + 40)) sbatch --parsable --wait --time="$minutes" -J "$name" -o "$work/$name.%j" \
            --goldminer=dw=2,cpus-per-dw=1 ${trainer_where:--p gpu --gpus=1} --wrap "srun --container-image=$container_image \
                --container-mounts=$(container_mounts)${extra_mounts:+,$extra_mounts} \
                --container-name=$(container_name) python3 $integration_dir/$script $*"
    ) || { echo "sbatch: $job"; tail -20 "$work/$name".* 2>/dev/null; return 1; }
    cat "$work/$name.${job%%;*}"
}

# Submits a --goldminer batch job (ARGS: sbatch arguments) with
# PYTHONPATH=/opt/goldminer/python (the package's mount point in the
# image) and enroot's bin first on PATH, and waits for it, longer than
# submit_goldminer_job does (the image unpacks); prints its id. The
# script's output goes to $work/cj.JOB.
submit_container_job() {
    local out
    out=$(
        if nodes_have_namespaces; then unset UCX_NET_DEVICES; fi
        export PYTHONPATH=/opt/goldminer/python PATH=$container_prefix/bin:$PATH
        timeout 280 sbatch --parsable --wait --time=4 -o "$work/cj.%j" "$@" 2>&1
    )
    # A job that ran but failed (sbatch --wait exits with its status) is
    # judged by its output.
    out=$(echo "${out%%;*}" | tail -1)
    case $out in
        '' | *[!0-9]*) echo "sbatch $*: failed: $out"; return 1 ;;
    esac
    echo "$out"
}

# The trainer's epochs of container_job.py dataloader, one line each.
dataloader_epochs() {
    /usr/bin/python3 -c '
import json, sys
for line in sys.stdin:
    if line.startswith("{\"epoch\""):
        e = json.loads(line)
        places = {w.split("@")[0].split(".")[0] for w in e["where"]}
        print("epoch %d: %d items, %d distinct, splits failed %d, workers lost %d, loaded by %s with torch %s" % (
            e["epoch"], e["items"], e["distinct"], e["splits_failed"], e["workers_lost"], sorted(places),
            e["worker_torch"]))
'
}

# pyxis and our plugin in both plugstack.conf orders: `srun --help` lists
# both plugins' options; a `sbatch --goldminer` job with --container-image,
# --container-mounts and --container-name on sbatch (its batch script runs
# in the image) and one with them on the srun of a host batch script: the
# containerised trainer runs the image's python and torch and sees the job's
# GOLDMINER_* variables, GOLDMINER_CONTAINER_IMAGE and
# GOLDMINER_CONTAINER_MOUNTS among them (set by our plugin from pyxis's
# options).
test_containers_pyxis_either_plugin_order_our_variables_reach_the_trainer() {
    local order help out job torch mounts form
    containers_ready || return
    torch=$(image_torch_version)
    mounts=$(container_mounts)
    for order in first last; do
        with_pyxis "$order" || return 1
        help=$(srun --help 2>&1)
        expect_contains "srun --help, pyxis $order" "$help" "--goldminer" >/dev/null ||
            { echo "srun --help, pyxis $order: no --goldminer"; return 1; }
        expect_contains "srun --help, pyxis $order" "$help" "--container-image" >/dev/null ||
            { echo "srun --help, pyxis $order: no --container-image"; return 1; }
        for form in sbatch srun; do
            if [ "$form" = sbatch ]; then
                job=$(submit_container_job --goldminer=dw=1 -p gpu --gpus=1 --container-image="$container_image" --container-mounts="$mounts" \
                      --container-name="$(container_name)" \
                      --wrap "python3 $integration_dir/container_job.py env") || { echo "$job"; return 1; }
            else
                job=$(submit_container_job --goldminer=dw=1 -p gpu --gpus=1 --wrap "srun --container-image=$container_image --container-mounts=$mounts \
                      --container-name=$(container_name) python3 $integration_dir/container_job.py env") ||
                      { echo "$job"; return 1; }
            fi
            out=$(cat "$work/cj.$job")
            for want in "image: goldminer container test image" "torch $torch" "GOLDMINER_DW=1" "GOLDMINER_DW_JOB=" \
                    "GOLDMINER_CONTAINER_IMAGE=$container_image" "GOLDMINER_CONTAINER_MOUNTS=$mounts"; do
                expect_contains "trainer output" "$out" "$want" >/dev/null || {
                    echo "$out" | tail -5
                    echo "pyxis $order in plugstack.conf, --container-* on $form, job $job: no '$want' in the containerised trainer's output"
                    return 1
                }
            done
        done
    done
}

# A host batch script's `srun --container-image=IMG python3 SCRIPT` in a
# `sbatch --goldminer=dw=2` job: goldminer.DataLoader over a Dataset that
# imports the image-only module (absent on the host) loads on the
# companion workers through a worker Python process SIGKILLed mid-epoch;
# both epochs every item once, and the workers report the image's torch
# version in the trainer's log (the host's python3 has torch 1.13).
test_containers_pyxis_dataloader_image_only_dataset_through_a_killed_worker() {
    local out rc marker="$work/container-kill-once"
    containers_ready || return
    with_pyxis first || return 1
    echo "item 250 kills its process while this file exists" >"$marker"
    out=$(run_pyxis_trainer_job ctdl container_job.py dataloader 500 "$marker") || { rc=$?; echo "$out"; return $rc; }
    expect_eq "the marker removed by the kill" "$([ -e "$marker" ] && echo present || echo gone)" gone ||
        { echo "$out" | tail -20; return 1; }
    expect_eq "epochs through the kill" "$(echo "$out" | dataloader_epochs)" \
        "epoch 0: 500 items, 500 distinct, splits failed 1, workers lost 0, loaded by ['goldminer-dw'] with torch ['$(image_torch_version)']
epoch 1: 500 items, 500 distinct, splits failed 1, workers lost 0, loaded by ['goldminer-dw'] with torch ['$(image_torch_version)']" ||
        { echo "$out" | tail -20; return 1; }
}

# goldminer.Session over a CSV file with a TorchScript program scripted by
# the image's torch in the containerised trainer (torch2_session_job.py):
# the workers run it in the image, every row once per epoch, outputs as
# computed in the trainer.
test_containers_pyxis_session_torchscript_program_of_the_images_torch() {
    local out rc rows=3000
    containers_ready || return
    with_pyxis first || return 1
    {
        echo "id,x,tag"
        seq 0 $((rows - 1)) | awk '{ printf "%d,%.1f,t%d\n", $1, $1 / 2, $1 % 7 }'
    } >"$work/container.csv"
    out=$(run_pyxis_trainer_job ctcsv torch2_session_job.py "$work/container.csv" 2) || { rc=$?; echo "$out"; return $rc; }
    expect_eq "the trainer's torch" "$(echo "$out" | grep '^torch ')" "torch $(image_torch_version)" ||
        { echo "$out" | tail -20; return 1; }
    expect_eq "epochs" "$(echo "$out" | grep '^{"epoch"')" \
        "{\"epoch\": 0, \"rows\": $rows, \"distinct\": $rows, \"outputs_match\": true}
{\"epoch\": 1, \"rows\": $rows, \"distinct\": $rows, \"outputs_match\": true}" || { echo "$out" | tail -20; return 1; }
}

# Whether every JOB runs.
jobs_running() {
    local j
    for j in "$@"; do [ "$(squeue -h -j "$j" -o %T 2>/dev/null)" = RUNNING ] || return 1; done
}

# The containerised trainer and its workers on one node: the trainer on
# c1 (partition cpu, no GPU), every other node taken by a job of its own,
# so that the companion job's workers start on c1 too; UCX then connects
# processes on one host across the container's user and mount namespaces.
# Checked: the items loaded on c1 only, every item once per epoch.
test_containers_pyxis_trainer_and_workers_on_one_node() {
    local out rc node blockers=() job gpus
    containers_ready || return
    with_pyxis first || return 1
    # A GPU node's job takes its GPUs too (the select plugin keeps CPUs
    # next to free GPUs out of other jobs).
    for node in $(sinfo -h -N -o %N | sort -u); do
        [ "$node" = c1 ] && continue
        gpus=$(scontrol show node "$node" | sed -n 's/.*Gres=gpu:\([0-9]*\).*/\1/p')
        job=$(sbatch --parsable -p all -w "$node" --exclusive ${gpus:+--gres=gpu:$gpus} -t 5 -o /dev/null \
            --wrap 'sleep 600') ||
            { echo "blocker on $node: $job"; scancel "${blockers[@]}" 2>/dev/null; return 1; }
        blockers+=("$job")
    done
    wait_for 60 jobs_running "${blockers[@]}" || { echo "blockers not running"; scancel "${blockers[@]}"; return 1; }
    out=$(trainer_where="-p cpu -w c1" run_pyxis_trainer_job ctnode container_job.py dataloader 300)
    rc=$?
    scancel "${blockers[@]}"
    [ "$rc" -eq 0 ] || { echo "$out"; return $rc; }
    expect_eq "where the items loaded" "$(echo "$out" | /usr/bin/python3 -c '
import json, sys
for line in sys.stdin:
    if line.startswith("{\"epoch\""):
        e = json.loads(line)
        print("epoch %d: %d items, %d distinct, on %s" % (e["epoch"], e["items"], e["distinct"],
                                                         sorted({w.split("@")[1] for w in e["where"]})))
')" "epoch 0: 300 items, 300 distinct, on ['c1']
epoch 1: 300 items, 300 distinct, on ['c1']" || { echo "$out" | tail -20; return 1; }
}

# goldminer.split in the containerised trainer: it compiles itself for the
# image's torch with the image's g++ on first use (minutes, once per image:
# the cache, beside the image, is mounted at its own path), cuts a model
# over the CSV's columns, and the workers run its worker program in the
# image. Checked: the split moved nodes, every row once per epoch, the
# trainer program on each batch equals the whole model on its rows.
test_containers_pyxis_split_program_of_the_images_torch() {
    local out rc rows=2000 cache=${container_image%/*}/split-cache
    containers_ready || return
    with_pyxis first || return 1
    mkdir -p -m 700 "$cache" || return 1
    {
        echo "id,x,tag"
        seq 0 $((rows - 1)) | awk '{ printf "%d,%.1f,t%d\n", $1, $1 / 2 - 300, $1 % 7 }'
    } >"$work/container-split.csv"
    out=$(export GOLDMINER_CACHE_DIR=$cache; job_minutes=15 extra_mounts=$cache:$cache \
        run_pyxis_trainer_job ctsplit container_job.py split "$work/container-split.csv" 2) ||
        { rc=$?; echo "$out"; return $rc; }
    expect_eq "the trainer's torch" "$(echo "$out" | grep '^torch ')" "torch $(image_torch_version)" ||
        { echo "$out" | tail -20; return 1; }
    expect_contains "the split" "$(echo "$out" | grep '^split: ')" " nodes on the workers" || { echo "$out" | tail -20; return 1; }
    if echo "$out" | grep -q '^split: 0 of'; then echo "the split moved nothing: $out"; return 1; fi
    expect_eq "epochs" "$(echo "$out" | grep '^{"epoch"')" \
        "{\"epoch\": 0, \"rows\": $rows, \"distinct\": $rows, \"outputs_match\": true}
{\"epoch\": 1, \"rows\": $rows, \"distinct\": $rows, \"outputs_match\": true}" || { echo "$out" | tail -20; return 1; }
}

# Charliecloud: the host batch script runs the trainer with `ch-run -b ...
# IMAGE_DIR -- python3 SCRIPT` and says so to goldminer
# (GOLDMINER_CONTAINER_RUNTIME=ch-run, GOLDMINER_CONTAINER_IMAGE=IMAGE_DIR,
# GOLDMINER_CONTAINER_MOUNTS): the DataLoader of the image-only Dataset
# loads on the companion workers in the same image, every item once, with
# the image's torch. ch-run binds only onto directories the image has:
# the image's empty /opt/gmtest/{scripts,work} and /run/munge.
test_containers_charliecloud_dataloader_image_only_dataset() {
    local out job root mounts
    containers_ready || return
    command -v ch-run >/dev/null || { echo "no ch-run (Debian's charliecloud-runtime; scripts/install-deps.sh installs it)"; return 77; }
    root=${container_image%/*}/root
    mounts="$integration_dir:/opt/gmtest/scripts,$work:/opt/gmtest/work,$state/munge:/run/munge"
    job=$(submit_container_job --goldminer=dw=2,cpus-per-dw=1 -p gpu --gpus=1 -J chdl --wrap "export GOLDMINER_CONTAINER_RUNTIME=ch-run GOLDMINER_CONTAINER_IMAGE=$root \
          GOLDMINER_CONTAINER_MOUNTS=$mounts USER=\${USER:-root}
          exec ch-run -b $build/python-torch2:/opt/goldminer/python -b $integration_dir:/opt/gmtest/scripts \
          -b $work:/opt/gmtest/work -b $state/munge:/run/munge \
          --set-env=GOLDMINER_MUNGE_SOCKET=/run/munge/munge.socket $root -- \
          python3 /opt/gmtest/scripts/container_job.py dataloader 500") || { echo "$job"; return 1; }
    out=$(cat "$work/cj.$job")
    expect_eq "ch-run epochs" "$(echo "$out" | dataloader_epochs)" \
        "epoch 0: 500 items, 500 distinct, splits failed 0, workers lost 0, loaded by ['goldminer-dw'] with torch ['$(image_torch_version)']
epoch 1: 500 items, 500 distinct, splits failed 0, workers lost 0, loaded by ['goldminer-dw'] with torch ['$(image_torch_version)']" ||
        { echo "$out" | tail -20; return 1; }
}
