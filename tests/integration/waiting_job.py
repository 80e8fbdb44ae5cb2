"""A training script for test_ctld.sh: goldminer.DataLoader over items that
each wait 4 ms (time.sleep, as a read from remote storage would) and cost
almost no CPU, so its data workers, not the trainer or the machine's two
cores, bound the job, and each worker added pays: the session's measured
scaling keeps growth and goldminer-ctld's sharing is what limits it. Runs
EPOCHS epochs of N items (until cancelled, for the tests); one JSON line
per epoch.

usage: waiting_job.py N EPOCHS"""
import json
import sys
import time

import torch

import goldminer


class WaitingItems(torch.utils.data.Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(0.004)
        return torch.tensor([i], dtype=torch.int64)


if __name__ == "__main__":
    n, epochs = int(sys.argv[1]), int(sys.argv[2])
    # Batches of 4: a 1-s scaling window then holds about 50 batches a
    # worker (at 16, about 12: too few to tell a doubling from the noise).
    loader = goldminer.DataLoader(WaitingItems(n), batch_size=4)
    for epoch in range(epochs):
        start, seen = time.monotonic(), 0
        for batch in loader:
            seen += batch.numel()
        print(json.dumps({"epoch": epoch, "items": seen,
                          "items_per_s": round(seen / (time.monotonic() - start), 1)}), flush=True)
