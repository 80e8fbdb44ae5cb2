#!/usr/bin/python3
"""Live replay: a seeded job mix from the Alibaba GPU
trace's dev slice, run as real sbatch jobs on a devcluster of its own, once
under cons_tres with CPU-bundled jobs and once under GoldMiner (the select
plugin, the SPANK plugin's data workers, goldminer-ctld); then goldminer-sim
on the same job list. Prints, from this one run, both policies' average JCT
and GPU allocation, the live and simulated ratios, and whether they agree
within 20%: against the simulator's defaults, and against the simulator
given the latencies this run measured (medians): --dispatch-s, a job's
submission to its script's start under that policy (Slurm's scheduling
cycle and launch, the plugins' work included); --job-start-s, a bundled
GPU job's script start to its first batch (the trainer's start-up);
--worker-start-s, the same under GoldMiner less that (its companion job's
scheduling and start).

usage: bench/replay/live_replay.py BUILD_DIR [--seed S] [--jobs N] [--load U] [--keep]
(root; ../shared/data beside the project; about 18 minutes)

The job list: bench/replay/make_jobs.py (its rules are assumptions, stated
there and in docs/SIMULATION-live.md). Each job's model comes from goldminer-sim
--jobs-csv, so the live jobs and the simulated ones are the same:
- a CPU-only job sleeps its run time on the CPUs it asked for;
- a GPU job's trainer (bench/replay/trainer.py) must consume work_s x F
  samples, F = cpus_needed x R samples/s (R a CPU's pre-processing rate);
  its GPU does F samples/s at most. Under bundled it asks for its request
  and pre-processes on it (speed min(1, request / needed), as the
  simulator's bundled); under GoldMiner it asks for its trainer's CPUs
  and its data workers pre-process, cpus_needed - cpus_trainer worker CPUs
  giving full speed (the simulator's goldminer with --remote-efficiency 1:
  here batches cross the real data plane, whose cost shows in the result).
"""
import argparse
import csv
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
PY = "/usr/bin/python3"

# The devcluster and the job model (the simulator gets the same values).
CLUSTER = {"gpu-nodes": 4, "gpus-per-node": 4, "cpu-nodes": 2, "cpus-per-node": 48, "mem-per-node": 49152}
CPUS_PER_DW, DW_MAX = 8, 8
SAMPLES_PER_CPU_S = 64  # R: one pre-processing CPU's samples/s
BATCH = 64


def log(message):
    print("live_replay: " + message, file=sys.stderr, flush=True)


def run(args, **kw):
    r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError("%s exited %d: %s" % (" ".join(args), r.returncode, r.stdout.strip()[-2000:]))
    return r.stdout


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def simulate(build, work, policy, latencies=None):
    """goldminer-sim on the job list; with `latencies` (the policy's
    dispatch_s, job_start_s, worker_start_s) those instead of its defaults."""
    args = [os.path.join(build, "goldminer-sim"), "--trace", os.path.join(work, "jobs.csv"), "--nodes",
            os.path.join(work, "nodes.csv"), "--policy", policy, "--cpus-per-dw", str(CPUS_PER_DW),
            "--dw-max", str(DW_MAX), "--remote-efficiency", "1", "--json"]
    if latencies is None:
        args += ["--jobs-csv", os.path.join(work, "sim-%s.csv" % policy)]
    else:
        args += ["--dispatch-s", "%.3f" % latencies[0], "--job-start-s", "%.3f" % latencies[1],
                 "--worker-start-s", "%.3f" % latencies[2]]
    return json.loads(run(args))


def median(values):
    v = sorted(values)
    return (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2 if v else 0.0


def start_latencies(live_records):
    """Per policy (dispatch_s, job_start_s, worker_start_s) measured in this
    run, medians: submission to the job script's start, under that policy;
    a GPU job's script start to its trainer's first batch under bundled (the
    trainer's own start-up, its local worker's included); and that under
    GoldMiner, less the bundled one (its companion job's scheduling and
    start)."""
    first = {p: median([r["first_batch_s"] for r in live_records[p] if r["gpus"]]) for p in live_records}
    job = first["bundled"]
    worker = max(0.0, first["goldminer"] - job)
    return {p: (median([r["start"] - r["submit"] for r in live_records[p]]), job, worker) for p in live_records}


class Cluster:
    def __init__(self, build, work, policy, port_base):
        self.dc = os.path.join(build, "goldminer-devcluster")
        self.dir = os.path.join(work, "cluster-" + policy)
        args = [self.dc, "up", "--dir", self.dir, "--port-base", str(port_base), "--plugin-dir",
                os.path.join(build, ".libs"), "--plugstack-args", "dw_command=" + os.path.join(work, "dw-paced"),
                "--timeout", "120"]
        for k, v in CLUSTER.items():
            args += ["--" + k, str(v)]
        args += ["--select", "cons_tres", "--ctld", "none"] if policy == "bundled" else []
        run(args)
        self.env = dict(os.environ, SLURM_CONF=os.path.join(self.dir, "etc", "slurm.conf"),
                        OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
                        # Sessions report to goldminer-ctld every second (5 s by default): the
                        # replay compresses time ~9x, so this keeps reactions in proportion.
                        GOLDMINER_AUTOSCALE_INTERVAL="1",
                        GOLDMINER_DW_PROGRAM=os.path.join(work, "dw-paced"),
                        PYTHONPATH=os.path.join(build, "python"))
        with open(os.path.join(self.dir, "run", "cluster")) as f:
            netns = "network=netns" in f.read()
        if netns:
            self.env.pop("UCX_NET_DEVICES", None)
        else:
            self.env["UCX_NET_DEVICES"] = "lo"

    def down(self):
        subprocess.run([self.dc, "down", "--dir", self.dir], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=120)

    def sbatch(self, args):
        return run(["sbatch", "--parsable"] + args, env=self.env).strip().split(";")[0]

    def running_ids(self, ids):
        out = run(["squeue", "-h", "-o", "%i", "-j", ",".join(ids)], env=self.env) if ids else ""
        return set(out.split())


def job_commands(policy, job, work, build):
    """sbatch arguments of one job under `policy` (the model from goldminer-sim)."""
    name, gpus = job["name"], int(round(float(job["gpus"])))
    request = int(round(float(job["cpus_requested"])))
    run_s = float(job["finish_s"]) - float(job["start_s"])  # under bundled, in the simulator
    minutes = math.ceil(4 * run_s / 60) + 5  # generous: only a runaway hits it
    out = os.path.join(work, "out-%s" % policy, name + ".out")
    stamp = "printf 'replay-%s %%s\\n' \"$(date +%%s.%%N)\""
    common = ["-J", "r-" + name, "-o", out, "--time", str(minutes), "-n", "1"]
    if gpus == 0:
        body = "%s; sleep %s; %s" % (stamp % "start", job["work_s"], stamp % "end")
        return common + ["-p", "all", "-c", str(request), "--wrap", body]
    needed, trainer = float(job["cpus_needed"]), float(job["cpus_trainer"])
    full_rate = needed * SAMPLES_PER_CPU_S
    samples = max(BATCH, round(float(job["work_s"]) * full_rate))
    cmd = [PY, os.path.join(HERE, "trainer.py"), "--input", os.path.join(work, "input.txt"), "--pace-lib",
           os.path.join(build, "bench", "replay", ".libs", "gm_pace.so"), "--samples", str(samples),
           "--full-rate", "%.3f" % full_rate, "--batch", str(BATCH)]
    if policy == "bundled":
        cmd += ["--pace-per-sample", "%.6f" % (1.0 / SAMPLES_PER_CPU_S), "--local-threads", str(request)]
        extra = ["-c", str(request)]
    else:
        # needed - trainer worker CPUs give full speed.
        pre = max(needed - trainer, 1e-3)
        cmd += ["--pace-per-sample", "%.6f" % (pre / full_rate)]
        extra = ["-c", str(int(math.ceil(trainer))),
                 "--goldminer=dw=1,dw-max=%d,cpus-per-dw=%d" % (DW_MAX, CPUS_PER_DW)]
    body = "%s; %s; %s" % (stamp % "start", " ".join(cmd), stamp % "end")
    return common + ["-p", "gpu", "--gpus=%d" % gpus] + extra + ["--wrap", body]


def replay(policy, jobs, work, build, port_base, budget_s):
    os.makedirs(os.path.join(work, "out-" + policy), exist_ok=True)
    cluster = Cluster(build, work, policy, port_base)
    submitted = {}  # name -> (job id, submit time)
    try:
        t0 = time.time()
        for job in jobs:
            delay = t0 + float(job["arrival_s"]) - time.time()
            if delay > 0:
                time.sleep(delay)
            submitted[job["name"]] = (cluster.sbatch(job_commands(policy, job, work, build)), time.time())
        log("%s: %d jobs submitted in %.0f s" % (policy, len(jobs), time.time() - t0))
        ids = [v[0] for v in submitted.values()]
        while cluster.running_ids(ids):
            if time.time() - t0 > budget_s:
                raise RuntimeError("%s: jobs still queued or running after %.0f s: %s" %
                                   (policy, budget_s, " ".join(sorted(cluster.running_ids(ids)))))
            time.sleep(2)
    finally:
        cluster.down()
    return collect(policy, jobs, work, submitted)


def collect(policy, jobs, work, submitted):
    """Per job: submit, start and end times (its script's stamps) and the trainer's JSON."""
    records = []
    for job in jobs:
        path = os.path.join(work, "out-" + policy, job["name"] + ".out")
        start = end = None
        trainer = {}
        with open(path, errors="replace") as f:
            for line in f:
                if line.startswith("replay-start "):
                    start = float(line.split()[1])
                elif line.startswith("replay-end "):
                    end = float(line.split()[1])
                elif line.startswith('{"samples"'):
                    trainer = json.loads(line)
        gpus = int(round(float(job["gpus"])))
        if start is None or end is None or (gpus and not trainer):
            raise RuntimeError("%s: job %s (%s) did not run to its end; its output: %s" %
                               (policy, job["name"], submitted[job["name"]][0], path))
        records.append({"name": job["name"], "gpus": gpus, "submit": submitted[job["name"]][1], "start": start,
                        "end": end, "speed": trainer.get("speed", 1.0),
                        "first_batch_s": trainer["first_batch_at"] - start if trainer else 0.0})
    return records


def metrics(records, total_gpus):
    """The simulator's definitions: average JCT over all jobs; GPU allocation
    averaged while some GPU job waits (over the makespan if none ever does)."""
    jct = [r["end"] - r["submit"] for r in records]
    points = sorted({t for r in records for t in (r["submit"], r["start"], r["end"])})
    held_t = contended_t = held_contended = held_all = 0.0
    for a, b in zip(points, points[1:]):
        mid = (a + b) / 2
        held = sum(r["gpus"] for r in records if r["start"] <= mid < r["end"])
        waiting = any(r["gpus"] and r["submit"] <= mid < r["start"] for r in records)
        held_all += held * (b - a)
        held_t += b - a
        if waiting:
            contended_t += b - a
            held_contended += held * (b - a)
    gpu = [r for r in records if r["gpus"]]
    return {"avg_jct_s": sum(jct) / len(jct),
            "avg_queue_s": sum(r["start"] - r["submit"] for r in records) / len(records),
            "gpu_alloc_rate": held_contended / (total_gpus * contended_t) if contended_t > 0
            else held_all / (total_gpus * held_t),
            "contended_share": contended_t / held_t if held_t else 0.0,
            "gpu_job_speed": sum(r["speed"] for r in gpu) / max(1, len(gpu)),
            "makespan_s": points[-1] - points[0]}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("build")
    p.add_argument("--trace", default=os.path.join(TOP, "..", "shared", "data", "traces", "alibaba-gpu-v2023",
                                                   "dev_slice.csv"))
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--jobs", type=int, default=40)
    p.add_argument("--load", type=float, default=1.2, help="offered GPU load (1.2: bundled queues at all)")
    p.add_argument("--port-base", type=int, default=23817)
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    a = p.parse_args()
    build = os.path.abspath(a.build)
    if not os.path.exists(a.trace):
        sys.exit("live_replay: %s: no such file (the trace is in ../shared/data; see its README)" % a.trace)
    pace = os.path.join(build, "bench", "replay", ".libs", "gm_pace.so")
    if not os.path.exists(pace):
        sys.exit("live_replay: %s: not built (configure found no libtorch?)" % pace)
    work = tempfile.mkdtemp(prefix="goldminer-replay.", dir="/var/tmp")
    os.chmod(work, 0o755)
    try:
        run([PY, os.path.join(HERE, "make_jobs.py"), a.trace, work, "--seed", str(a.seed), "--jobs", str(a.jobs),
             "--load", str(a.load)] + ["--%s=%s" % kv for kv in CLUSTER.items()])
        with open(os.path.join(work, "dw-paced"), "w") as f:
            f.write("#!/bin/sh\n# goldminer-dw with gm_bench::pace (bench/replay/pace_op.cc)\n"
                    "LD_PRELOAD=%s exec %s \"$@\"\n" % (pace, os.path.join(build, "goldminer-dw")))
        os.chmod(os.path.join(work, "dw-paced"), 0o755)
        # Long enough that no job reaches an epoch's end (where the last
        # splits leave threads idle): every trainer reads one epoch.
        with open(os.path.join(work, "input.txt"), "w") as f:
            f.writelines("sample %d\n" % i for i in range(500000))
        sim = {policy: simulate(build, work, policy) for policy in ("bundled", "goldminer")}
        jobs = read_csv(os.path.join(work, "sim-bundled.csv"))
        budget = max(float(j["arrival_s"]) for j in jobs) + 4 * max(float(j["finish_s"]) - float(j["start_s"])
                                                                   for j in jobs) + 300
        total_gpus = CLUSTER["gpu-nodes"] * CLUSTER["gpus-per-node"]
        live, records = {}, {}
        for i, policy in enumerate(("bundled", "goldminer")):
            log("%s: replaying %d jobs" % (policy, len(jobs)))
            records[policy] = replay(policy, jobs, work, build, a.port_base + 100 * i, budget)
            live[policy] = metrics(records[policy], total_gpus)
        latencies = start_latencies(records)
        measured = {policy: simulate(build, work, policy, latencies[policy]) for policy in ("bundled", "goldminer")}
        report(live, sim, measured, latencies, a, len(jobs))
    finally:
        if a.keep:
            log("work directory kept: " + work)
        else:
            shutil.rmtree(work, ignore_errors=True)


def report(live, sim, measured, latencies, a, n):
    print("live replay: %d jobs of the dev slice, seed %d, offered GPU load %.2f, on %d GPU nodes x %d GPUs x %d "
          "CPUs + %d CPU nodes" % (n, a.seed, a.load, CLUSTER["gpu-nodes"], CLUSTER["gpus-per-node"],
                                   CLUSTER["cpus-per-node"], CLUSTER["cpu-nodes"]))
    for policy in ("bundled", "goldminer"):
        print("latencies measured under %-9s (medians): dispatch %.2f s (submission to script start), job start "
              "%.2f s (bundled: script start to first batch), worker start %.2f s (GoldMiner's, less that)" %
              ((policy,) + latencies[policy]))
    print("%-10s %-10s %10s %10s %10s %10s %10s" % ("", "policy", "avg_jct_s", "queue_s", "gpu_alloc", "contended",
                                                     "gpu_speed"))
    runs = (("live", live), ("simulated", sim), ("sim+lat", measured))
    for policy in ("bundled", "goldminer"):
        for label, figures in runs:
            f = figures[policy]
            print("%-10s %-10s %10.1f %10.1f %10.3f %10.3f %10s" %
                  (label, policy, f["avg_jct_s"], f["avg_queue_s"], f["gpu_alloc_rate"], f["contended_share"],
                   "%.3f" % f["gpu_job_speed"] if "gpu_job_speed" in f else "-"))
    result = {}
    for what, key in (("jct_ratio", "avg_jct_s"), ("alloc_ratio", "gpu_alloc_rate")):
        ratio = {}
        for label, figures in runs:
            b, g = figures["bundled"][key], figures["goldminer"][key]
            ratio[label] = b / g if key == "avg_jct_s" else g / b
        lr = ratio["live"]
        result[what] = {"live": round(lr, 3)}
        for label in ("simulated", "sim+lat"):
            sr = ratio[label]
            agree = abs(lr / sr - 1) <= 0.2
            result[what][label] = round(sr, 3)
            result[what][label + "_within_20_percent"] = agree
            print("%-12s live %.3f  %-9s %.3f  live/simulated %.3f  %s" %
                  (what, lr, label, sr, lr / sr, "agree (within 20%)" if agree else "DISAGREE (beyond 20%)"))
        if key == "gpu_alloc_rate":
            for label, figures in runs:
                if min(figures["goldminer"]["contended_share"], figures["bundled"]["contended_share"]) == 0:
                    print("  (%s: a policy never queued a GPU job: its allocation is over its makespan, the "
                          "other's while GPU jobs waited; that ratio compares unlike things)" % label)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
