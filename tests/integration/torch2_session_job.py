"""The Session trainer of test_torch2.sh, run with a torch 2.x venv's python
in a `sbatch --goldminer` job: goldminer.Session over a CSV file (columns
id, x numeric; tag categorical) with a TorchScript worker program scripted
here, run on the companion job's goldminer-dw workers with this torch.
Prints the torch it ran with, then one JSON line per epoch: rows seen,
distinct ids, whether every batch's program outputs equal running the
program here on the rows its sample ids name.

Usage: torch2_session_job.py CSV EPOCHS
"""
import json
import sys

import torch

import goldminer


class Program(torch.nn.Module):
    def forward(self, numeric, categorical):
        return numeric[:, 0].to(torch.int64), numeric[:, 1] * 2.0 + 1.0, torch.remainder(categorical, 1000)


def read_rows(path):
    """(id, x) of each data record, in file order (the sample ids' record index)."""
    with open(path) as f:
        next(f)
        return [(int(line.split(",")[0]), float(line.split(",")[1])) for line in f]


def main():
    path, epochs = sys.argv[1], int(sys.argv[2])
    rows = read_rows(path)
    program = torch.jit.script(Program())
    print("torch %s" % torch.__version__, flush=True)
    with goldminer.Session("csv:" + path, batch_size=64, program=program, seed=3) as s:
        for epoch in range(epochs):
            ids, match = [], True
            for ident, x2, tag in s:
                records = s.last_sample_ids[:, 1].tolist()
                want = torch.tensor([rows[r][0] for r in records], dtype=torch.int64)
                match = match and torch.equal(ident, want)
                match = match and torch.allclose(x2, torch.tensor([rows[r][1] * 2.0 + 1.0 for r in records]))
                match = match and bool(((tag >= 0) & (tag < 1000)).all())
                ids += ident.tolist()
            print(json.dumps({"epoch": epoch, "rows": len(ids), "distinct": len(set(ids)),
                              "outputs_match": bool(match)}), flush=True)


if __name__ == "__main__":
    main()
