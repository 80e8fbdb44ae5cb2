#!/usr/bin/env python3
"""Trains a small DLRM-style click model on Criteo-format TSV with its
pre-processing on GoldMiner data workers.

The model is written as one program, feature transforms included, the way
it would be trained with a DataLoader. goldminer.split cuts it into a worker
program (the stateless transforms: fill-missing, log1p, bucketize + one-hot,
id hashing) and a trainer program (embeddings, MLPs, loss); the session
ships the worker program to the data workers and this script trains the
trainer program on the batches they send, on the GPU when there is one.

    python3 examples/train_dlrm.py --input criteo-tsv:day_0.tsv --epochs 3

Workers: --workers N starts N local goldminer-dw processes, as does
`goldminer-run --workers N -- python3 examples/train_dlrm.py ...`; under
Slurm, `sbatch --goldminer=dw=2 ...` has the SPANK plugin start them on the
site's CPU nodes (examples/dataplane-job.sh does it as a het component) and
set GOLDMINER_LISTEN and GOLDMINER_AUTH=munge, which the session reads.

Prints one JSON object per epoch on stdout: epoch, samples, unique_samples
(distinct (file, record) pairs: every sample exactly once means both equal
the input's records), loss (mean binary cross-entropy), seconds, samples_per_s,
workers.
"""
import argparse
import json
import sys
import time
from typing import List

import torch
import torch.nn.functional as F
from torch import Tensor, nn

import goldminer

NUM_DENSE, NUM_CAT = 13, 26


class ClickModel(nn.Module):
    def __init__(self, ids_per_column: int = 10007, dim: int = 8):
        super().__init__()
        # Plain int and list attributes: constants, so what reads them stays
        # stateless and can move to the workers.
        self.ids_per_column = ids_per_column
        self.boundaries: List[float] = [0.25 * i for i in range(1, 16)]
        self.embs = nn.ModuleList([nn.Embedding(ids_per_column, dim) for _ in range(NUM_CAT)])
        self.bottom = nn.Sequential(nn.Linear(NUM_DENSE * 17, 64), nn.ReLU(), nn.Linear(64, dim), nn.ReLU())
        self.top = nn.Sequential(nn.Linear(dim * (NUM_CAT + 1), 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, label: Tensor, dense: Tensor, sparse: Tensor) -> Tensor:
        # Pre-processing (stateless).
        y = torch.nan_to_num(label, nan=0.0)
        x = torch.log1p(torch.clamp(torch.nan_to_num(dense, nan=0.0), min=0.0))
        buckets = torch.bucketize(x, torch.tensor(self.boundaries, dtype=x.dtype))
        onehot = F.one_hot(buckets, 16).to(torch.float32).flatten(1)
        ids = torch.where(sparse >= 0, torch.remainder(sparse * 2654435761, self.ids_per_column - 1) + 1,
                          torch.zeros_like(sparse))
        # The model (stateful).
        feats: List[Tensor] = [self.bottom(torch.cat([x, onehot], dim=1))]
        for i, emb in enumerate(self.embs):
            feats.append(emb(ids[:, i]))
        logit = self.top(torch.cat(feats, dim=1)).squeeze(1)
        return F.binary_cross_entropy_with_logits(logit, y)


def example_batch(n: int = 64):
    """Inputs in the criteo-tsv reader's layout (readers/README.md)."""
    g = torch.Generator().manual_seed(0)
    dense = torch.randint(-2, 200, (n, NUM_DENSE), generator=g).to(torch.float32)
    dense[torch.rand(n, NUM_DENSE, generator=g) < 0.2] = float("nan")
    sparse = torch.randint(0, 1 << 32, (n, NUM_CAT), generator=g)
    sparse[torch.rand(n, NUM_CAT, generator=g) < 0.1] = -1
    return (torch.randint(0, 2, (n,), generator=g).to(torch.float32), dense, sparse)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--input", required=True, help="criteo-tsv:PATH[,PATH...]")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--workers", type=int, default=0, help="local goldminer-dw processes to start")
    p.add_argument("--min-workers", type=int, default=0,
                   help="train only once this many workers are connected (at most --join-timeout s)")
    p.add_argument("--join-timeout", type=float, default=60.0)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    if not a.input.startswith("criteo-tsv:"):
        p.error("--input: expected criteo-tsv:PATH[,PATH...], got %r" % a.input)

    torch.manual_seed(a.seed)
    model = torch.jit.script(ClickModel())
    worker, trainer, report = goldminer.split(model, example_batch())
    print("train_dlrm: split: %d of %d nodes run on the workers; the trainer receives %d tensors, %.0f bytes "
          "per sample (the reader's batches: %.0f)" % (report["nodes_moved"], report["nodes_total"], len(report["cut"]),
                                                       report["bytes_per_sample_after"],
                                                       report["bytes_per_sample_before"]), file=sys.stderr)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    trainer.to(device)
    opt = torch.optim.Adagrad(trainer.parameters(), lr=a.lr)

    with goldminer.Session(a.input, batch_size=a.batch_size, program=worker, workers=a.workers,
                           seed=a.seed) as session:
        print("train_dlrm: listening on %s" % session.address, file=sys.stderr, flush=True)
        try:
            session.wait_for_workers(a.min_workers, timeout=a.join_timeout)
        except RuntimeError as e:
            sys.exit("train_dlrm: --min-workers: %s" % e)
        offsets = torch.tensor([0] + list(session.records_per_file)).cumsum(0)
        for epoch in range(a.epochs):
            seen = torch.zeros(session.total_records, dtype=torch.bool)
            samples, loss_sum, t0 = 0, 0.0, time.monotonic()
            for batch in session:
                ids = session.last_sample_ids
                seen[offsets[ids[:, 0]] + ids[:, 1]] = True
                loss = trainer(*(t.to(device, non_blocking=True) for t in batch))
                opt.zero_grad()
                loss.backward()
                opt.step()
                samples += ids.size(0)
                loss_sum += loss.item() * ids.size(0)
            seconds = time.monotonic() - t0
            print(json.dumps({"epoch": epoch, "samples": samples, "unique_samples": int(seen.sum()),
                              "loss": round(loss_sum / max(samples, 1), 5), "seconds": round(seconds, 3),
                              "samples_per_s": round(samples / max(seconds, 1e-9), 1),
                              "workers": session.metrics()["workers"]}), flush=True)


if __name__ == "__main__":
    main()
