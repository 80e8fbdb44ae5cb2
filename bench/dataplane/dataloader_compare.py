#!/usr/bin/env python3
"""The PyTorch DataLoader side of benchmark (c): reads the same files as
goldminer-consume and applies the same TorchScript transforms
(make_programs.py), with num_workers = k and the same batch size.

  criteo  an IterableDataset: worker w of k reads the TSV and takes every
          k-th block of B lines (so each line is read by one worker), parses
          them in Python (NaN / -1 for missing, hex ids masked to 63 bits, as
          the criteo-tsv reader does) and runs criteo.pt on the batch.
  jpeg    a map-style Dataset over the folder's .jpg/.jpeg files (sorted):
          torchvision.io.decode_jpeg to RGB (PIL for what it cannot decode),
          then jpeg.pt's one() per image; the default collate stacks them.
          --crop: first a RandomResizedCrop box of the image (torchvision's
          get_params), as goldminer-consume --jpeg-decode crop:S reads it.

Prints one JSON object: dataset, workers, batch_size, epochs, samples,
seconds and samples_per_s over the epochs after the first (warm-up),
cpu_seconds of this process and its workers over all epochs, and per epoch
epoch_samples and epoch_cpu_seconds (cumulative CPU seconds at the epoch's
end, counted from this process's start), whose differences give the CPU
cost of the epochs after the first without start-up.

usage: dataloader_compare.py criteo|jpeg PATH PROGRAM --workers K
         --batch-size B --epochs E
"""
import argparse
import json
import math
import os
import resource
import time

import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, get_worker_info

_MASK63 = (1 << 63) - 1


def _float(v):
    return float(v) if v else math.nan


def _hex(v):
    return int(v, 16) & _MASK63 if v else -1


class CriteoBatches(IterableDataset):
    def __init__(self, path, program, batch_size):
        self.path, self.program_path, self.batch_size = path, program, batch_size

    def __iter__(self):
        info = get_worker_info()
        wid, n = (info.id, info.num_workers) if info else (0, 1)
        program = torch.jit.load(self.program_path)
        block, index = [], 0
        with open(self.path) as f:
            for line in f:
                block.append(line)
                if len(block) == self.batch_size:
                    if index % n == wid:
                        yield self._batch(program, block)
                    block, index = [], index + 1
        if block and index % n == wid:
            yield self._batch(program, block)

    @staticmethod
    def _batch(program, lines):
        labels, dense, sparse = [], [], []
        for line in lines:
            f = line.rstrip("\r\n").split("\t")
            f += [""] * (40 - len(f))
            labels.append(_float(f[0]))
            dense.append([_float(v) for v in f[1:14]])
            sparse.append([_hex(v) for v in f[14:40]])
        with torch.no_grad():
            return program(torch.tensor(labels, dtype=torch.float32), torch.tensor(dense, dtype=torch.float32),
                           torch.tensor(sparse, dtype=torch.int64))


class JpegImages(Dataset):
    def __init__(self, folder, program, crop=False):
        self.files = sorted(os.path.relpath(os.path.join(d, f), folder) for d, _, fs in os.walk(folder)
                            for f in fs if f.lower().endswith((".jpg", ".jpeg")))
        self.folder, self.program_path, self.program, self.crop = folder, program, None, crop

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        if self.program is None:
            self.program = torch.jit.load(self.program_path)
        from torchvision.io import ImageReadMode, decode_jpeg
        path = os.path.join(self.folder, self.files[i])
        with open(path, "rb") as f:
            raw = f.read()
        try:
            image = decode_jpeg(torch.frombuffer(bytearray(raw), dtype=torch.uint8), mode=ImageReadMode.RGB)
            image = image.permute(1, 2, 0)
        except RuntimeError:  # e.g. CMYK: PIL converts it
            from PIL import Image
            import numpy as np
            image = torch.from_numpy(np.asarray(Image.open(path).convert("RGB")).copy())
        if self.crop:
            from torchvision.transforms import RandomResizedCrop
            top, left, h, w = RandomResizedCrop.get_params(image.permute(2, 0, 1), (0.08, 1.0), (3 / 4, 4 / 3))
            image = image[top:top + h, left:left + w]
        with torch.no_grad():
            return self.program.one(image.contiguous())


def cpu_seconds():
    """CPU seconds of this process and its workers: its own, the reaped
    workers' and, from /proc, those of workers still alive (persistent)."""
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    total = s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime
    me, tick = os.getpid(), os.sysconf("SC_CLK_TCK")
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        rest = stat[stat.rindex(")") + 2:].split()  # after the command name
        if int(rest[1]) == me:  # ppid: a worker of this loader
            total += (int(rest[11]) + int(rest[12])) / tick  # utime + stime
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dataset", choices=["criteo", "jpeg"])
    ap.add_argument("path")
    ap.add_argument("program")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=4096)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--crop", action="store_true", help="jpeg: a RandomResizedCrop box of each image first")
    a = ap.parse_args()
    torch.set_num_threads(1)  # like goldminer-dw's one intra-op thread per worker
    # fork, stated rather than left to Python: from 3.14 the default is
    # forkserver, whose workers are children of the server process, not of this
    # one, so neither cpu_seconds() nor GNU time would count their CPU time.
    context = "fork" if a.workers > 0 else None
    # persistent_workers: the workers (and the program each loaded) stay
    # from one epoch to the next instead of being started again: the
    # stronger baseline.
    persistent = a.workers > 0
    if a.dataset == "criteo":
        loader = DataLoader(CriteoBatches(a.path, a.program, a.batch_size), batch_size=None,
                            num_workers=a.workers, multiprocessing_context=context, persistent_workers=persistent)
    else:
        loader = DataLoader(JpegImages(a.path, a.program, a.crop), batch_size=a.batch_size, shuffle=False,
                            num_workers=a.workers, multiprocessing_context=context, persistent_workers=persistent)
    cpu0 = cpu_seconds()
    counted_samples, counted_seconds, total = 0, 0.0, 0
    epoch_samples, epoch_cpu = [], []
    for epoch in range(a.epochs):
        t0 = time.monotonic()
        samples = 0
        for batch in loader:
            first = batch[0] if isinstance(batch, (tuple, list)) else batch
            samples += first.shape[0]
        seconds = time.monotonic() - t0
        epoch_samples.append(samples)
        epoch_cpu.append(cpu_seconds())
        total += samples
        if epoch > 0 or a.epochs == 1:
            counted_samples += samples
            counted_seconds += seconds
    print(json.dumps({"dataset": a.dataset, "workers": a.workers, "batch_size": a.batch_size, "epochs": a.epochs,
                      "samples": counted_samples, "seconds": counted_seconds,
                      "samples_per_s": counted_samples / counted_seconds, "total_samples": total,
                      "cpu_seconds": cpu_seconds() - cpu0, "epoch_samples": epoch_samples,
                      "epoch_cpu_seconds": epoch_cpu}))


if __name__ == "__main__":
    main()
