"""Copy overlap on a GPU trainer (issue 21): the step time of a training
loop whose batches arrive in host memory, handed over three ways:

  pageable   batches in pageable memory, batch.to("cuda") at the top of each
             step (what a loop over pageable batches does): the copy goes
             through the driver's staging buffer and the step waits for it
  pinned     batches in pinned memory (registered with cudaHostRegister, as
             the session's receive buffers are with pin_memory=True),
             .to("cuda", non_blocking=True) at the top of each step: faster,
             but still on the trainer's stream, before its kernels
  staged     pinned as above, through goldminer's stager
             (goldminer._staging.Stager, what Session/DataLoader(device=)
             use): copied on a side stream up to `prefetch` batches ahead,
             while the step before runs

The step is a real one: forward, backward and SGD of a small conv net on
[B,3,224,224] float32 batches (B=64: 38.5 MB a batch, about the size of a
JPEG pipeline's output), sized so that copy and compute are comparable
(the case where overlap matters). Prints the mean step time of each way
(after warm-up, median of ROUNDS rounds of STEPS steps) and the ratios
pageable/staged and pinned/staged, measured in this one run.

usage: staging_bench.py [--batch B] [--steps N] [--rounds R] [--width W]
"""
import argparse
import statistics
import time

import torch

from goldminer import _staging


def model(width, dev):
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, width, 7, stride=4, padding=3), torch.nn.ReLU(),
        torch.nn.Conv2d(width, width, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(width, 1000)).to(dev)


def host_batches(n, batch, pinned):
    out = []
    for k in range(n):
        x = torch.randn(batch, 3, 224, 224)
        y = torch.randint(0, 1000, (batch,))
        if pinned:  # registered in place, as the session's receive buffers are
            register = getattr(torch.cuda.cudart(), "cudaHostRegister", None)
            if register is None:  # a torch without it: pinned by its allocator instead
                x, y = x.pin_memory(), y.pin_memory()
            for t in (x, y) if register is not None else ():
                rc = register(t.data_ptr(), t.numel() * t.element_size(), 0)
                assert int(rc) == 0, "cudaHostRegister: %r" % (rc,)
        out.append((x, y))
    return out


def run(way, net, opt, batches, steps, dev, prefetch):
    loss_fn = torch.nn.CrossEntropyLoss()

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()

    torch.cuda.synchronize()
    t0 = time.perf_counter()
    if way == "staged":
        k = {"i": 0}

        def pull():
            if k["i"] == steps:
                raise StopIteration
            b = batches[k["i"] % len(batches)]
            k["i"] += 1
            return b, (0, 0, k["i"] - 1), None

        stager = _staging.Stager(pull, lambda: steps - k["i"], dev, prefetch)
        while True:
            try:
                x, y = next(stager)
            except StopIteration:
                break
            step(x, y)
    else:
        for i in range(steps):
            x, y = batches[i % len(batches)]
            step(x.to(dev, non_blocking=(way == "pinned")), y.to(dev, non_blocking=(way == "pinned")))
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / steps


def main():
    ap = argparse.ArgumentParser(usage=__doc__)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--width", type=int, default=96)
    ap.add_argument("--prefetch", type=int, default=2)
    a = ap.parse_args()
    dev = torch.device("cuda", torch.cuda.current_device())
    torch.backends.cudnn.benchmark = True
    net = model(a.width, dev)
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    pageable = host_batches(4, a.batch, False)
    pinned = host_batches(4, a.batch, True)
    mb = pageable[0][0].numel() * 4 / 1e6
    print("GPU %s, torch %s; batch %d x 3x224x224 float32 = %.1f MB; conv net width %d; %d steps x %d rounds"
          % (torch.cuda.get_device_name(dev), torch.__version__, a.batch, mb, a.width, a.steps, a.rounds))
    # What the copy alone and the step alone take, for the reader.
    x_dev = pinned[0][0].to(dev)
    y_dev = pinned[0][1].to(dev)
    copy_s, step_s = [], []
    for _ in range(10):
        torch.cuda.synchronize(); t = time.perf_counter(); pinned[0][0].to(dev, non_blocking=True); torch.cuda.synchronize()
        copy_s.append(time.perf_counter() - t)
    run("pinned", net, opt, [(x_dev, y_dev)], 10, dev, a.prefetch)  # warm-up (cudnn autotune)
    for _ in range(3):
        step_s.append(run("pinned", net, opt, [(x_dev, y_dev)], a.steps, dev, a.prefetch))
    print("copy alone (pinned): %.2f ms (%.1f GB/s); step alone (batch already on the GPU): %.2f ms"
          % (1e3 * min(copy_s), mb / 1e3 / min(copy_s), 1e3 * min(step_s)))
    results = {w: [] for w in ("pageable", "pinned", "staged")}
    for w in results:  # warm-up
        run(w, net, opt, pinned if w != "pageable" else pageable, 5, dev, a.prefetch)
    for _ in range(a.rounds):  # interleaved, so drift hits every way alike
        for w in results:
            results[w].append(run(w, net, opt, pinned if w != "pageable" else pageable, a.steps, dev, a.prefetch))
    med = {w: statistics.median(v) for w, v in results.items()}
    for w, v in results.items():
        print("%-8s step %.2f ms (median of %d; min %.2f, max %.2f)" % (w, 1e3 * med[w], len(v), 1e3 * min(v),
                                                                       1e3 * max(v)))
    print("ratio pageable/staged %.2f, pinned/staged %.2f (step time; > 1: staging is faster)"
          % (med["pageable"] / med["staged"], med["pinned"] / med["staged"]))
    print("bound: max(copy, step) / (copy + step) = %.2f of the unstaged pinned step"
          % (max(min(copy_s), min(step_s)) / (min(copy_s) + min(step_s))))


if __name__ == "__main__":
    main()
