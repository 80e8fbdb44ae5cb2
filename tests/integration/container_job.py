"""The trainer of test_containers.sh, run by the image's python3 inside a
container (pyxis/enroot or ch-run) in a `sbatch --goldminer` job.

`container_job.py env`: prints the image's marker line, this python's torch
and one line `NAME=VALUE` per GOLDMINER_* variable it sees.

`container_job.py dataloader N [MARKER]`: goldminer.DataLoader over a
Dataset that imports gm_image_only_module, a module only the image has, so
its items can load only where the image's python runs; each item carries
the torch version of the process that loaded it (bytes as a uint8 tensor).
With MARKER, a file: the first read of item N // 2 while it exists removes
it and sends SIGKILL to the Python process that reads it, as the kernel's
OOM killer would. Prints the image's marker line, then one JSON line per
epoch: items, distinct ids, the workers' torch versions, where the items
were loaded, the session's failed splits and lost workers.
"""
import json
import os
import signal
import socket
import sys

import gm_image_only_module
import torch

VERSION_BYTES = 32


def image_marker():
    with open("/etc/goldminer-test-image") as f:
        return f.read().strip()


class ImageItems(torch.utils.data.Dataset):
    def __init__(self, n, kill_marker=None):
        self.n, self.kill_marker = n, kill_marker

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.kill_marker and i == self.n // 2 and os.path.exists(self.kill_marker):
            os.unlink(self.kill_marker)
            os.kill(os.getpid(), signal.SIGKILL)
        version = gm_image_only_module.TORCH_VERSION.encode()[:VERSION_BYTES].ljust(VERSION_BYTES, b"\0")
        return {"id": i, "x": torch.full((4,), float(i)),
                "torch": torch.tensor(list(version), dtype=torch.uint8),
                "where": "%s@%s" % (os.environ.get("SLURM_JOB_NAME", "?"), socket.gethostname())}


def run_dataloader(n, marker):
    import goldminer
    loader = goldminer.DataLoader(ImageItems(n, marker), batch_size=16, shuffle=True)
    for epoch in range(2):
        ids, where, versions = [], set(), set()
        for batch in loader:
            assert torch.equal(batch["x"][:, 0], batch["id"].float())
            ids += batch["id"].tolist()
            where.update(batch["where"])
            versions.update(bytes(row).rstrip(b"\0").decode() for row in batch["torch"].tolist())
        metrics = loader.session.metrics()
        print(json.dumps({"epoch": epoch, "items": len(ids), "distinct": len(set(ids)),
                          "worker_torch": sorted(versions), "where": sorted(where),
                          "splits_failed": metrics["splits_failed"], "workers_lost": metrics["workers_lost"]}),
              flush=True)


def main():
    print("image: %s" % image_marker(), flush=True)
    print("torch %s" % torch.__version__, flush=True)
    if sys.argv[1] == "env":
        for name in sorted(os.environ):
            if name.startswith("GOLDMINER_"):
                print("%s=%s" % (name, os.environ[name]))
    elif sys.argv[1] == "dataloader":
        run_dataloader(int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else None)
    else:
        sys.exit("container_job.py: unknown command %r (env or dataloader)" % sys.argv[1])


if __name__ == "__main__":
    main()
