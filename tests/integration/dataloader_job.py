"""A training script for test_dataloader.sh: goldminer.DataLoader over a
Dataset class defined here, with num_workers=0, in a `sbatch --goldminer`
job: the companion job's goldminer-dw processes load it (they report their
SLURM_JOB_NAME and host in each item). One JSON line per epoch."""
import json
import os
import socket
import sys

import torch

import goldminer


class Items(torch.utils.data.Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return {"id": i, "x": torch.full((4,), float(i)),
                "where": "%s@%s" % (os.environ.get("SLURM_JOB_NAME", "?"), socket.gethostname())}


if __name__ == "__main__":
    n = int(sys.argv[1])
    loader = goldminer.DataLoader(Items(n), batch_size=16, shuffle=True)
    for epoch in range(2):
        ids, where = [], set()
        for batch in loader:
            assert torch.equal(batch["x"][:, 0], batch["id"].float())
            ids += batch["id"].tolist()
            where.update(batch["where"])
        print(json.dumps({"epoch": epoch, "items": len(ids), "distinct": len(set(ids)), "len": len(loader),
                          "where": sorted(where), "trainer": os.environ.get("SLURM_JOB_NAME", "?")}), flush=True)
