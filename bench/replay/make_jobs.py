#!/usr/bin/python3
"""Makes the live replay's job list: a seeded sample of the Alibaba GPU
trace's dev slice, fitted to a devcluster and compressed in time, written
in the trace's own format so that goldminer-sim replays the very same jobs.

usage: make_jobs.py DEV_SLICE.csv OUT_DIR [--seed S] [--jobs N] [--load U] ...
Writes OUT_DIR/jobs.csv (pods) and OUT_DIR/nodes.csv (the devcluster).

How a trace pod becomes a job (each rule is a modelling assumption, stated
in docs/SIMULATION-live.md next to the figures):
- The sample: N pods drawn uniformly (seeded) among those the trace ran,
  so GPU and CPU-only pods come in the trace's proportions.
- GPUs: a pod sharing a fraction of a GPU holds a whole one (Slurm's fake
  GPUs are not shared); a pod with more GPUs than a node has gets a node's
  worth, its CPU request scaled by the same factor.
- CPUs: the request rounded up to whole CPUs, at least one per GPU (the
  trainer's), at most a node's.
- Time: each run time divided by the compression factor (dev slice median
  run time / --median-s), then clipped to [--min-s, --max-s] so that
  start-up costs stay small against it; arrivals keep the trace's order and
  relative gaps, scaled so that the offered GPU load is --load.
"""
import argparse
import csv
import math
import os
import random
import statistics
import sys


def fail(message):
    sys.exit("make_jobs.py: " + message)


def read_ran_pods(path):
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        fail("%s: %s" % (path, e.strerror))
    need = {"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "creation_time", "deletion_time",
            "scheduled_time"}
    if not rows or not need.issubset(rows[0].keys()):
        fail("%s: not a pods CSV of the trace (columns needed: %s)" % (path, ", ".join(sorted(need))))
    ran = []
    for line, r in enumerate(rows, start=2):
        if not r["scheduled_time"]:
            continue  # never ran: no run time
        try:
            pod = {"name": r["name"], "cpu": int(r["cpu_milli"]) / 1000.0, "mem": int(r["memory_mib"]),
                   "gpus": int(r["num_gpu"]), "created": int(r["creation_time"]),
                   "run_s": int(r["deletion_time"]) - int(r["scheduled_time"]), "qos": r.get("qos", "")}
        except ValueError as e:
            fail("%s:%d: %s" % (path, line, e))
        if pod["run_s"] > 0:
            ran.append(pod)
    if not ran:
        fail("%s: no pod that ran" % path)
    return ran


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("trace")
    p.add_argument("out_dir")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--jobs", type=int, default=40, help="jobs to draw")
    p.add_argument("--load", type=float, default=0.9, help="offered GPU load over the arrival span")
    p.add_argument("--median-s", type=float, default=60, help="the dev slice's median run time becomes this")
    p.add_argument("--min-s", type=float, default=30)
    p.add_argument("--max-s", type=float, default=240)
    p.add_argument("--gpu-nodes", type=int, default=4)
    p.add_argument("--gpus-per-node", type=int, default=4)
    p.add_argument("--cpu-nodes", type=int, default=2)
    p.add_argument("--cpus-per-node", type=int, default=48)
    p.add_argument("--mem-per-node", type=int, default=49152, help="MB")
    a = p.parse_args()
    if a.jobs < 1 or a.load <= 0 or not 0 < a.min_s <= a.median_s <= a.max_s:
        fail("--jobs must be >= 1, --load > 0 and 0 < --min-s <= --median-s <= --max-s")

    ran = read_ran_pods(a.trace)
    compression = statistics.median(p["run_s"] for p in ran) / a.median_s
    pods = sorted(random.Random(a.seed).sample(ran, min(a.jobs, len(ran))), key=lambda p: (p["created"], p["name"]))
    jobs = []
    for pod in pods:
        gpus = min(pod["gpus"], a.gpus_per_node)
        cpu = pod["cpu"] * (gpus / pod["gpus"] if pod["gpus"] > 0 else 1.0)
        cpus = min(a.cpus_per_node, max(gpus, 1, math.ceil(cpu - 1e-9)))
        run_s = min(a.max_s, max(a.min_s, pod["run_s"] / compression))
        jobs.append({"name": pod["name"], "cpus": cpus, "gpus": gpus, "run_s": round(run_s),
                     "created": pod["created"], "qos": pod["qos"]})
    total_gpus = a.gpu_nodes * a.gpus_per_node
    span = sum(j["gpus"] * j["run_s"] for j in jobs) / (total_gpus * a.load)
    first, last = jobs[0]["created"], jobs[-1]["created"]
    for j in jobs:
        j["arrival"] = round((j["created"] - first) / max(1, last - first) * span)

    os.makedirs(a.out_dir, exist_ok=True)
    mem_per_cpu = a.mem_per_node // a.cpus_per_node
    with open(os.path.join(a.out_dir, "jobs.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "qos", "pod_phase",
                    "creation_time", "deletion_time", "scheduled_time"])
        for j in jobs:
            w.writerow([j["name"], j["cpus"] * 1000, j["cpus"] * mem_per_cpu, j["gpus"], 1000 if j["gpus"] else 0,
                        "", j["qos"], "Succeeded", j["arrival"], j["arrival"] + j["run_s"], j["arrival"]])
    with open(os.path.join(a.out_dir, "nodes.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["sn", "cpu_milli", "memory_mib", "gpu", "model"])
        for i in range(a.gpu_nodes):
            w.writerow(["g%d" % (i + 1), a.cpus_per_node * 1000, a.mem_per_node, a.gpus_per_node, "fake"])
        for i in range(a.cpu_nodes):
            w.writerow(["c%d" % (i + 1), a.cpus_per_node * 1000, a.mem_per_node, 0, ""])
    gpu_jobs = sum(1 for j in jobs if j["gpus"])
    print("make_jobs.py: %d jobs (%d with GPUs) from %s, seed %d; time compressed %.1fx, run times %d-%d s, "
          "arrivals over %.0f s (offered GPU load %.2f on %d GPUs)" %
          (len(jobs), gpu_jobs, os.path.basename(a.trace), a.seed, compression, min(j["run_s"] for j in jobs),
           max(j["run_s"] for j in jobs), span, a.load, total_gpus))


if __name__ == "__main__":
    main()
