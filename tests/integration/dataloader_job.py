"""A training script for test_dataloader.sh: goldminer.DataLoader over a
Dataset class defined here, with num_workers=0, in a `sbatch --goldminer`
job: the companion job's goldminer-dw processes load it (they report their
SLURM_JOB_NAME and host in each item). One JSON line per epoch.
With a second argument, a marker file: the first read of item n // 2
while it exists removes it and sends SIGKILL to the Python process that
reads it, as the kernel's OOM killer would (test_dataloader.sh)."""
import json
import os
import signal
import socket
import sys

import torch

import goldminer


class Items(torch.utils.data.Dataset):
    def __init__(self, n, kill_marker=None):
        self.n, self.kill_marker = n, kill_marker

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.kill_marker and i == self.n // 2 and os.path.exists(self.kill_marker):
            os.unlink(self.kill_marker)
            os.kill(os.getpid(), signal.SIGKILL)
        return {"id": i, "x": torch.full((4,), float(i)),
                "where": "%s@%s" % (os.environ.get("SLURM_JOB_NAME", "?"), socket.gethostname())}


if __name__ == "__main__":
    n = int(sys.argv[1])
    loader = goldminer.DataLoader(Items(n, sys.argv[2] if len(sys.argv) > 2 else None), batch_size=16, shuffle=True)
    for epoch in range(2):
        ids, where = [], set()
        for batch in loader:
            assert torch.equal(batch["x"][:, 0], batch["id"].float())
            ids += batch["id"].tolist()
            where.update(batch["where"])
        metrics = loader.session.metrics()
        print(json.dumps({"epoch": epoch, "items": len(ids), "distinct": len(set(ids)), "len": len(loader),
                          "where": sorted(where), "trainer": os.environ.get("SLURM_JOB_NAME", "?"),
                          "splits_failed": metrics["splits_failed"], "workers_lost": metrics["workers_lost"]}),
              flush=True)
