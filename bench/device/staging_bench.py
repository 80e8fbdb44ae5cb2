"""Copy overlap on a GPU trainer: the step time of a training
loop fed by a real goldminer.Session (the installed package's C++
extension, local worker threads reading a text file of images), its
batches handed over three ways:

  pageable   Session(...): batches received into pageable memory,
             batch.to("cuda") at the top of each step: the copy goes
             through the driver's staging buffer and the step waits for it
  pinned     Session(..., pin_memory=True): received into buffers the
             session registered with CUDA, .to("cuda", non_blocking=True) at
             the top of each step: faster, but still on the trainer's
             stream, before its kernels
  staged     Session(..., device="cuda"): pinned as above and copied by
             goldminer's stager (goldminer/_staging.py) on a side stream up
             to `prefetch` batches ahead, while the step before runs

Each line of the input is one image, 3x224x224 uint8 pixels (values 14-255,
so no byte is a line end); a batch is (data uint8 [B*150528], lengths), the
text reader's output, viewed as [B,3,224,224] and scaled to float on the GPU
(B=128: 19.3 MB copied a step). The step is a real one: forward, backward
and SGD of a small conv net. Each way has its own session (W workers); a
round is one epoch of each, interleaved, so drift hits every way alike.
Prints the copy alone and the step alone, then each way's step time (median
of ROUNDS epochs of STEPS steps, each timed from the end of its first step,
after a warm-up epoch), how much of it the
trainer waited for the session (the session's metrics()["trainer_wait_fraction"]
after each epoch: high means the workers, not the copy, set the pace) and the ratios
pageable/staged and pinned/staged, measured in this one run.

usage: staging_bench.py [--batch B] [--steps N] [--rounds R] [--width W]
                        [--workers W] [--prefetch P] [--dir DIR]
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

import torch

import goldminer

PIXELS = 3 * 224 * 224


def model(width, dev):
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, width, 7, stride=4, padding=3), torch.nn.ReLU(),
        torch.nn.Conv2d(width, width, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(width, 1000)).to(dev)


def write_images(path, n):
    """n lines of PIXELS bytes each (14-255) and a newline."""
    with open(path, "wb") as f:
        for start in range(0, n, 256):
            rows = torch.randint(14, 256, (min(256, n - start), PIXELS + 1), dtype=torch.uint8)
            rows[:, -1] = 10
            f.write(rows.numpy().tobytes())


def sessions(spec, a):
    kw = dict(workers=a.workers, transport="local", records_per_split=a.batch, queue_batches=2 * a.prefetch + 8)
    return {"pageable": goldminer.Session(spec, a.batch, **kw),
            "pinned": goldminer.Session(spec, a.batch, pin_memory=True, **kw),
            "staged": goldminer.Session(spec, a.batch, device="cuda", prefetch=a.prefetch, **kw)}


def run(way, session, net, opt, dev, batch):
    """(seconds per step, steps timed) of one epoch of `session`, handed over
    `way`: every step after the first (the workers start an epoch when its
    first batch is asked for, which is not the hand-over)."""
    loss_fn = torch.nn.CrossEntropyLoss()

    def step(data):
        x = data.view(batch, 3, 224, 224).float().div_(255)
        y = data.view(batch, PIXELS)[:, 0].long() % 1000
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()

    t0, n = None, 0
    for data, lengths in session:
        if way != "staged":
            data = data.to(dev, non_blocking=(way == "pinned"))
        step(data)
        if t0 is None:  # timed from the end of the first step: not the epoch's start-up
            torch.cuda.synchronize()
            t0 = time.perf_counter()
        else:
            n += 1
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / max(n, 1), n


def main():
    ap = argparse.ArgumentParser(usage=__doc__)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--workers", type=int, default=max(1, min(8, (os.cpu_count() or 2) // 2)))
    ap.add_argument("--prefetch", type=int, default=2)
    ap.add_argument("--dir", default=None, help="where the input file is written (default: a temporary folder)")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("staging_bench.py: needs a torch with CUDA and a GPU: torch %s %s" % (
            torch.__version__, "was built without CUDA" if torch.version.cuda is None else "sees no GPU"))
    dev = torch.device("cuda", torch.cuda.current_device())
    torch.backends.cudnn.benchmark = True
    net = model(a.width, dev)
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    with tempfile.TemporaryDirectory(prefix="goldminer-staging-bench.", dir=a.dir) as folder:
        path = os.path.join(folder, "images.txt")
        write_images(path, a.batch * a.steps)
        all_sessions = sessions("text:" + path, a)
        try:
            measure(a, dev, net, opt, all_sessions)
        finally:
            for s in all_sessions.values():
                s.close()


def measure(a, dev, net, opt, all_sessions):
    mb = a.batch * PIXELS / 1e6
    print("GPU %s, torch %s, %s; batch %d x 3x224x224 uint8 = %.1f MB; conv net width %d; "
          "%d steps x %d rounds; %d local workers per session"
          % (torch.cuda.get_device_name(dev), torch.__version__, sys.modules["goldminer._session"].__file__,
             a.batch, mb, a.width, a.steps, a.rounds, a.workers))
    for w, s in all_sessions.items():
        print("%-8s receive memory: %s%s" % (w, s.receive_memory, "; " + "; ".join(s.receive_memory_warnings)
                                             if s.receive_memory_warnings else ""))
    # What the copy alone and the step alone take, for the reader: a batch
    # of the pinned session (in its registered receive buffer).
    host, _ = next(all_sessions["pinned"])
    on_dev = host.to(dev)
    copy_s = []
    for _ in range(10):
        torch.cuda.synchronize(); t = time.perf_counter(); host.to(dev, non_blocking=True); torch.cuda.synchronize()
        copy_s.append(time.perf_counter() - t)
    step_s = []

    class Repeat:  # the batch already on the GPU, a.steps times
        def __iter__(self):
            return ((on_dev, None) for _ in range(a.steps))

    for _ in range(4):  # the first is the warm-up (cudnn autotune)
        step_s.append(run("staged", Repeat(), net, opt, dev, a.batch)[0])
    del host
    for _ in all_sessions["pinned"]:  # the rest of that epoch
        pass
    print("copy alone (pinned): %.2f ms (%.1f GB/s); step alone (batch already on the GPU): %.2f ms"
          % (1e3 * min(copy_s), mb / 1e3 / min(copy_s), 1e3 * min(step_s[1:])))
    results = {w: [] for w in all_sessions}
    waits = {w: [] for w in all_sessions}
    for w, s in all_sessions.items():  # warm-up epoch
        run(w, s, net, opt, dev, a.batch)
    for _ in range(a.rounds):
        for w, s in all_sessions.items():
            seconds, n = run(w, s, net, opt, dev, a.batch)
            if n != a.steps - 1:
                sys.exit("staging_bench.py: %s: an epoch of %d batches, not %d" % (w, n + 1, a.steps))
            results[w].append(seconds)
            waits[w].append(s.metrics().get("trainer_wait_fraction", float("nan")))
    med = {w: statistics.median(v) for w, v in results.items()}
    for w, v in results.items():
        print("%-8s step %.2f ms (median of %d epochs; min %.2f, max %.2f); trainer_wait_fraction %.2f"
              % (w, 1e3 * med[w], len(v), 1e3 * min(v), 1e3 * max(v), statistics.median(waits[w])))
    print("ratio pageable/staged %.2f, pinned/staged %.2f (step time; > 1: staging is faster)"
          % (med["pageable"] / med["staged"], med["pinned"] / med["staged"]))
    print("bound: max(copy, step) / (copy + step) = %.2f of the unstaged pinned step"
          % (max(min(copy_s), min(step_s[1:])) / (min(copy_s) + min(step_s[1:]))))


if __name__ == "__main__":
    main()
