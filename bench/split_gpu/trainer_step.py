"""Trainer time per training step of split programs on a GPU trainer:
the DLRM-style model, `dataset` split against `extended` (split_bench's
trainer-time figure, on a GPU); the DCN at batch 64 and 4096, `dataset`
against the cut priced for a GPU trainer (`cuda`) and for a CPU trainer
(`cpu`).

The programs come from goldminer-split (bench/split_gpu/prepare.sh); this
script only runs them, as a trainer would:

  worker (on a CPU data worker, not timed here) -> cut tensors in pinned
  host memory -> the trainer copies them to the GPU (non-blocking) -> trainer
  forward -> loss -> backward -> SGD step with the parameters on the GPU.

Figures, per step, median of ROUNDS rounds of STEPS steps after WARMUP steps:
  trainer CPU ms   CPU time of the trainer's thread (time.thread_time) while
                   it issues the steps (host-side work: TorchScript
                   interpreter, autograd, kernel launches, copies); the GPU
                   is synchronised after the round, outside the timed span
  wall ms          wall time per step including that synchronisation
Also the same programs with the trainer on the CPU (OMP 1 thread), the
figure bench/split_bench prints on a machine without a GPU.

usage: python3 trainer_step.py DIR [--device cuda|cpu] [--steps N] [--rounds R]
DIR (one case folder of prepare.sh) holds MODE_{worker,trainer}.pt for
dataset and the other modes (extended; cuda and cpu pricing) and
example.pt (torch.save((dense, cat))); each mode is timed and compared
with dataset mode.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch


def load(path, device):
    m = torch.jit.load(path, map_location=device)
    m.train()
    return m


def cut_of(worker, example):
    with torch.no_grad():
        out = worker(*example)
    if isinstance(out, torch.Tensor):
        out = (out,)
    return tuple(t.contiguous() for t in out)


def measure(trainer, cut_host, device, steps, rounds, warmup):
    params = [p for p in trainer.parameters() if p.requires_grad]
    opt = torch.optim.SGD(params, lr=1e-3)
    on_gpu = device.type == "cuda"
    if on_gpu:
        cut_host = tuple(t.pin_memory() for t in cut_host)

    def step():
        xs = tuple(t.to(device, non_blocking=True) for t in cut_host)
        out = trainer(*xs)
        loss = out.float().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    def sync():
        if on_gpu:
            torch.cuda.synchronize()

    for _ in range(warmup):
        step()
    sync()
    cpu, wall = [], []
    for _ in range(rounds):
        w0, c0 = time.perf_counter(), time.thread_time()
        for _ in range(steps):
            step()
        c1 = time.thread_time()
        sync()
        w1 = time.perf_counter()
        cpu.append((c1 - c0) * 1e3 / steps)
        wall.append((w1 - w0) * 1e3 / steps)
    return statistics.median(cpu), statistics.median(wall)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=20)
    args = ap.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("trainer_step.py: no CUDA device", file=sys.stderr)
        return 1
    torch.set_num_threads(1)
    torch.manual_seed(0)
    example = torch.load(f"{args.dir}/example.pt")
    rows = {}
    # dataset first (the reference), then the others in name order.
    found = sorted(f[:-len("_trainer.pt")] for f in os.listdir(args.dir) if f.endswith("_trainer.pt"))
    if "dataset" not in found:
        print(f"trainer_step.py: {args.dir} has no dataset_trainer.pt (run prepare.sh)", file=sys.stderr)
        return 1
    for mode in ["dataset"] + [m for m in found if m != "dataset"]:
        worker = torch.jit.load(f"{args.dir}/{mode}_worker.pt", map_location="cpu")
        trainer = load(f"{args.dir}/{mode}_trainer.pt", device)
        cut = cut_of(worker, example)
        cpu_ms, wall_ms = measure(trainer, cut, device, args.steps, args.rounds, args.warmup)
        rows[mode] = {
            "trainer_cpu_ms": cpu_ms,
            "wall_ms": wall_ms,
            "cut_bytes_per_batch": sum(t.numel() * t.element_size() for t in cut),
        }
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu (1 thread)"
    print(f"trainer_step.py: torch {torch.__version__}, device {name}, batch {example[0].shape[0]}, "
          f"median of {args.rounds} rounds x {args.steps} steps after {args.warmup} warm-up steps")
    print(f"  {'mode':<9} {'trainer CPU ms/step':>20} {'wall ms/step':>13} {'cut MB/batch':>13}")
    for mode, r in rows.items():
        print(f"  {mode:<9} {r['trainer_cpu_ms']:>20.3f} {r['wall_ms']:>13.3f} {r['cut_bytes_per_batch'] / 1e6:>13.2f}")
    ratios = {}
    for mode in rows:
        if mode == "dataset":
            continue
        ratio = rows["dataset"]["trainer_cpu_ms"] / rows[mode]["trainer_cpu_ms"]
        wall_ratio = rows["dataset"]["wall_ms"] / rows[mode]["wall_ms"]
        ratios[mode] = {"ratio_cpu": ratio, "ratio_wall": wall_ratio}
        goal = f" (the split's goal >= 2x: {'met' if ratio >= 2 else 'NOT met'})" if mode == "extended" else ""
        print(f"  trainer time per step, dataset / {mode}: CPU {ratio:.2f}x{goal}, wall {wall_ratio:.2f}x")
    print(json.dumps({"device": name, "torch": torch.__version__, "ratios": ratios, **rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
