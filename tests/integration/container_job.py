"""The trainer of test_containers.sh, run by the image's python3 inside a
container (pyxis/enroot or ch-run) in a `sbatch --goldminer` job.

`container_job.py env`: prints the image's marker line, this python's torch
and one line `NAME=VALUE` per GOLDMINER_* variable it sees.

`container_job.py split CSV EPOCHS`: goldminer.split cuts a model over the
CSV's columns (id, x numeric; tag categorical) in this image's torch (the
split compiles itself for it on first use, into $GOLDMINER_CACHE_DIR);
goldminer.Session runs the worker program on the companion workers; prints
the torch and the split's report line, then one JSON line per epoch: rows,
distinct ids, whether the trainer program on each batch equals the model
on the rows its sample ids name.

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
import sys

import gm_image_only_module
import torch

from dataloader_job import Items  # beside this script: the killing Dataset of test_dataloader.sh

VERSION_BYTES = 32


def image_marker():
    with open("/etc/goldminer-test-image") as f:
        return f.read().strip()


class ImageItems(Items):
    """dataloader_job.py's items, each with the torch version of the
    process that loaded it."""

    def __getitem__(self, i):
        item = super().__getitem__(i)
        version = gm_image_only_module.TORCH_VERSION.encode()[:VERSION_BYTES].ljust(VERSION_BYTES, b"\0")
        item["torch"] = torch.tensor(list(version), dtype=torch.uint8)
        return item


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


class CsvModel(torch.nn.Module):
    """Stateless features of the CSV's numeric columns (goldminer.split
    moves them to the workers), then a trainable layer (the trainer's)."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 1)

    def forward(self, numeric, categorical):
        ident, x = numeric[:, 0], numeric[:, 1]
        feats = torch.stack([torch.log1p(torch.abs(x)), torch.remainder(ident, 7.0), x * 2.0 + 1.0], dim=1)
        return self.lin(feats).squeeze(1)


def run_split(path, epochs):
    import goldminer
    with open(path) as f:
        next(f)
        rows = [(float(line.split(",")[0]), float(line.split(",")[1])) for line in f]
    torch.manual_seed(0)
    model = torch.jit.script(CsvModel())
    example = (torch.zeros(64, 2), torch.zeros(64, 1, dtype=torch.int64))
    worker, trainer, report = goldminer.split(model, example)
    print("split: %d of %d nodes on the workers" % (report["nodes_moved"], report["nodes_total"]), flush=True)
    with goldminer.Session("csv:" + path, batch_size=64, program=worker, seed=3) as s:
        for epoch in range(epochs):
            ids, match = [], True
            for outputs in s:
                records = s.last_sample_ids[:, 1].tolist()
                numeric = torch.tensor([rows[r] for r in records])
                want = model(numeric, torch.zeros(len(records), 1, dtype=torch.int64))
                match = match and torch.allclose(trainer(*outputs), want, atol=1e-5)
                ids += [int(rows[r][0]) for r in records]
            print(json.dumps({"epoch": epoch, "rows": len(ids), "distinct": len(set(ids)),
                              "outputs_match": bool(match)}), flush=True)


def main():
    print("image: %s" % image_marker(), flush=True)
    print("torch %s" % torch.__version__, flush=True)
    if sys.argv[1] == "env":
        for name in sorted(os.environ):
            if name.startswith("GOLDMINER_"):
                print("%s=%s" % (name, os.environ[name]))
    elif sys.argv[1] == "dataloader":
        run_dataloader(int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else None)
    elif sys.argv[1] == "split":
        run_split(sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit("container_job.py: unknown command %r (env, dataloader or split)" % sys.argv[1])


if __name__ == "__main__":
    main()
