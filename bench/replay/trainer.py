#!/usr/bin/python3
"""The trainer of one GPU job of the live replay (bench/replay/live_replay.py):
a real goldminer.Session consumer whose progress follows the simulator's
job model.

- Its GPU takes --batch / --full-rate seconds a batch (a sleep: the
  devcluster's GPUs are fake), so it runs at --full-rate samples/s when
  batches are there in time, and slower when its pre-processing is short
  of CPUs.
- Every pre-processing CPU is a worker thread that spends
  --pace-per-sample seconds a sample in gm_bench::pace (pace_op.cc: wall
  time, no CPU). Under bundled the job's own CPUs do it (--local-threads:
  one goldminer-dw on the job's node with that many threads); under
  GoldMiner its data workers do (the SPANK plugin's companion jobs, sized by
  goldminer-ctld).
- It stops after --samples samples (work at full speed x full rate) and
  prints one JSON line: samples, seconds, samples_per_s, speed (of full),
  workers at the end, and first_batch_at (wall-clock time of its first
  batch: what the live replay measures start-up latencies from).
"""
import argparse
import json
import sys
import time
from typing import Tuple

import torch


class Pace(torch.nn.Module):
    """The worker program: the text reader's batch, after its pre-processing time."""

    def __init__(self, seconds_per_sample: float):
        super().__init__()
        self.seconds_per_sample = seconds_per_sample

    def forward(self, data: torch.Tensor, lengths: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        seconds = self.seconds_per_sample * float(lengths.size(0))
        return torch.ops.gm_bench.pace(data, seconds), lengths


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--input", required=True, help="text file: one sample a line")
    p.add_argument("--pace-lib", required=True, help="gm_pace.so (bench/replay/pace_op.cc)")
    p.add_argument("--samples", type=int, required=True)
    p.add_argument("--full-rate", type=float, required=True, help="samples/s with enough pre-processing")
    p.add_argument("--pace-per-sample", type=float, required=True, help="pre-processing seconds a sample a CPU")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--local-threads", type=int, default=0, help="bundled: pre-process on this many local CPUs")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    if a.samples < 1 or a.full_rate <= 0 or a.pace_per_sample < 0 or a.batch < 1 or a.local_threads < 0:
        sys.exit("trainer.py: --samples, --full-rate and --batch must be positive, --pace-per-sample and "
                 "--local-threads not negative")
    torch.ops.load_library(a.pace_lib)
    import goldminer

    program = torch.jit.script(Pace(a.pace_per_sample))
    workers = 1 if a.local_threads > 0 else 0
    step_per_sample = 1.0 / a.full_rate
    consumed = 0
    first_batch_at = None
    t0 = time.monotonic()
    with goldminer.Session("text:" + a.input, batch_size=a.batch, program=program, workers=workers,
                           threads=max(1, a.local_threads), seed=a.seed) as session:
        while consumed < a.samples:
            for _ in session:
                if first_batch_at is None:
                    first_batch_at = time.time()
                n = int(session.last_sample_ids.size(0))
                time.sleep(n * step_per_sample)  # the GPU's step on this batch
                consumed += n
                if consumed >= a.samples:
                    break
        seconds = time.monotonic() - t0
        workers_now = session.metrics()["workers"]
    rate = consumed / max(seconds, 1e-9)
    print(json.dumps({"samples": consumed, "seconds": round(seconds, 3), "samples_per_s": round(rate, 1),
                      "speed": round(rate / a.full_rate, 4), "workers": workers_now,
                      "first_batch_at": round(first_batch_at, 3)}), flush=True)


if __name__ == "__main__":
    main()
