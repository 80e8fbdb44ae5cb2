#!/usr/bin/env python3
"""Dataset benchmark: goldminer.DataLoader against torch's DataLoader on
the same user Dataset, the same num_workers, batch size and shuffle.

Pipelines (each a map-style Dataset defined in this file, so the workers
load this script as __mp_main__, as they would a training script):
  parse  pure-Python parsing of Criteo-like TSV lines (gen_criteo.py, seeded,
         ROWS rows held in memory): split, int(), log1p, hex ids modulo a
         vocabulary -> (label float32, dense float32 [13], sparse int64 [26])
  jpeg   PIL + torchvision on ../shared/data/datasets/images_jpeg (268 real
         JPEGs; skipped, with the reason, if absent): open, RGB,
         RandomResizedCrop(224), RandomHorizontalFlip, ToTensor, Normalize

Measured per pipeline and loader, in this one run, over EPOCHS epochs after
one warm-up epoch (workers kept across epochs: persistent_workers=True for
torch): samples/s (wall) and samples per CPU-second of the whole process
tree (the trainer and every worker process under it, user + system, from
/proc), i.e. samples/s per core, and the trainer process's own CPU-seconds
per 1000 samples (what stays on a GPU node when the workers run elsewhere).
Ratios: goldminer / torch; goal >= 1x per core (the same Python code, no
overhead added).

Assumptions: both loaders run on this machine's cores; the trainer only
iterates (no model), so the figures are the input pipeline's alone; a
torch worker process and a goldminer-dw + its Python child count alike.

usage: python_dataset_bench.py [--workers 2] [--epochs 3] [--rows 20000]
       [--batch-parse 256] [--batch-jpeg 32] [--shared ../shared/data] [--only parse|jpeg]
"""

import argparse
import math
import os
import subprocess
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
TICKS = os.sysconf("SC_CLK_TCK")


class CriteoLines(torch.utils.data.Dataset):
    def __init__(self, path):
        with open(path) as f:
            self.lines = f.read().splitlines()

    def __len__(self):
        return len(self.lines)

    def __getitem__(self, i):
        fields = self.lines[i].split("\t")
        fields += [""] * (40 - len(fields))
        label = float(fields[0] or 0)
        dense = [math.log1p(max(int(x), 0)) if x else 0.0 for x in fields[1:14]]
        sparse = [int(x, 16) % 1000003 if x else 0 for x in fields[14:40]]
        return (torch.tensor(label, dtype=torch.float32), torch.tensor(dense, dtype=torch.float32),
                torch.tensor(sparse, dtype=torch.int64))


class Images(torch.utils.data.Dataset):
    def __init__(self, folder):
        self.files = sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.lower().endswith(".jpg"))
        self.transform = None

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        from PIL import Image
        import torchvision.transforms as T
        if self.transform is None:
            self.transform = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
                                        T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
        with Image.open(self.files[i]) as im:
            return self.transform(im.convert("RGB")), i % 10

    def __getstate__(self):
        return {"files": self.files, "transform": None}


def tree_cpu(root):
    """(CPU seconds of `root` and all its descendants, of `root` alone)."""
    parent, cpu = {}, {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                rest = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[int(d)] = int(rest[1])
        cpu[int(d)] = (int(rest[11]) + int(rest[12])) / TICKS
    total, stack = 0.0, [root]
    while stack:
        p = stack.pop()
        total += cpu.get(p, 0.0)
        stack.extend(c for c, pp in parent.items() if pp == p)
    return total, cpu.get(root, 0.0)


def measure(loader, epochs):
    n = 0
    for batch in loader:  # warm-up: workers start, files reach the page cache
        pass
    cpu0, own0 = tree_cpu(os.getpid())
    t0 = time.monotonic()
    for _ in range(epochs):
        for batch in loader:
            first = batch[0]
            n += first.shape[0]
    wall = time.monotonic() - t0
    cpu1, own1 = tree_cpu(os.getpid())
    return {"samples": n, "wall": wall, "cpu": cpu1 - cpu0, "own": own1 - own0}


def run(name, ds, batch, args):
    import goldminer
    rows = {}
    loaders = {
        "torch": lambda: torch.utils.data.DataLoader(ds, batch_size=batch, shuffle=True, num_workers=args.workers,
                                                     persistent_workers=True),
        "goldminer": lambda: goldminer.DataLoader(ds, batch_size=batch, shuffle=True, num_workers=args.workers),
    }
    for kind, make in loaders.items():
        loader = make()
        rows[kind] = measure(loader, args.epochs)
        if kind == "goldminer":
            loader.close()
        del loader
    for kind, r in rows.items():
        print("%-6s %-9s workers=%d batch=%d: %d samples, %.0f samples/s, %.0f samples per CPU-s, "
              "trainer %.3f CPU-s per 1000 samples" %
              (name, kind, args.workers, batch, r["samples"], r["samples"] / r["wall"], r["samples"] / r["cpu"],
               1000 * r["own"] / r["samples"]))
    g, t = rows["goldminer"], rows["torch"]
    print("%-6s ratio goldminer/torch: per core %.3f, wall %.3f, trainer CPU %.3f" %
          (name, (g["samples"] / g["cpu"]) / (t["samples"] / t["cpu"]), (g["samples"] / g["wall"]) /
           (t["samples"] / t["wall"]), (g["own"] / g["samples"]) / (t["own"] / t["samples"])))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--rows", type=int, default=20000)
    p.add_argument("--batch-parse", type=int, default=256)
    p.add_argument("--batch-jpeg", type=int, default=32)
    p.add_argument("--shared", default=os.path.join(HERE, "..", "..", "..", "shared", "data"))
    p.add_argument("--only", choices=["parse", "jpeg"])
    a = p.parse_args()
    print("machine: %d cores; torch %s; workers=%d, epochs=%d after a warm-up epoch" %
          (os.cpu_count(), torch.__version__, a.workers, a.epochs))
    if a.only in (None, "parse"):
        tsv = "/tmp/goldminer-python-bench-%d.tsv" % os.getpid()
        subprocess.run([sys.executable, os.path.join(HERE, "gen_criteo.py"), tsv, str(a.rows), "7"], check=True)
        try:
            run("parse", CriteoLines(tsv), a.batch_parse, a)
        finally:
            os.unlink(tsv)
    if a.only in (None, "jpeg"):
        folder = os.path.join(a.shared, "datasets", "images_jpeg")
        if not os.path.isdir(folder):
            print("jpeg   SKIPPED: %s is absent (../shared/data holds the 268 JPEGs)" % folder)
        else:
            run("jpeg", Images(folder), a.batch_jpeg, a)


if __name__ == "__main__":
    main()
