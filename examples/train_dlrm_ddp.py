#!/usr/bin/env python3
"""Trains train_dlrm.py's click model data-parallel (DDP): one process per
rank (GPU), each with its own goldminer.Session over the same input.

Each epoch the sessions give every sample to exactly one rank and every rank
the same number of batches, so DDP's ranks step together; the split's
worker program runs on GoldMiner data workers, the trainer program under
DistributedDataParallel (gloo on CPU, nccl on GPUs).

    # 2 ranks on this machine, each with 1 local goldminer-dw:
    python3 examples/train_dlrm_ddp.py --input criteo-tsv:day_0.tsv --nprocs 2 --workers 1
    # as torchrun or srun starts them (RANK/WORLD_SIZE, or SLURM_PROCID/
    # SLURM_STEP_NUM_TASKS; MASTER_ADDR/MASTER_PORT, or --master-addr):
    torchrun --nproc-per-node 2 examples/train_dlrm_ddp.py --input criteo-tsv:day_0.tsv
    # a --goldminer job: the ranks share the job's data workers (rank 0 gets
    # them and sends each of the others its share):
    sbatch --goldminer -N2 --ntasks-per-node=2 --gpus-per-task=1 \
        --wrap "srun python3 examples/train_dlrm_ddp.py --input criteo-tsv:day_0.tsv"

Prints one JSON object per epoch and rank on stdout: epoch, rank,
world_size, samples, batches, id_sum (the sum of the samples' places in the
input: over the ranks N(N-1)/2 when each sample came once), loss,
params_digest (a sum over the model's parameters after the epoch: equal, up
to rounding, on every rank when DDP kept them in step), seconds.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_dlrm  # noqa: E402  (the model, beside this script)

import goldminer  # noqa: E402


def env_int(*names):
    for n in names:
        v = os.environ.get(n)
        if v:
            return int(v)
    return None


def train(rank, world_size, a):
    os.environ.setdefault("MASTER_ADDR", a.master_addr)
    os.environ.setdefault("MASTER_PORT", str(a.master_port))
    # Gloo finds its interface from the host name; where the node's name
    # resolves elsewhere, GLOO_SOCKET_IFNAME says which one.
    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo", rank=rank, world_size=world_size)
    device = torch.device("cuda", rank % torch.cuda.device_count()) if cuda else torch.device("cpu")
    torch.manual_seed(a.seed)  # the same initial parameters on every rank (DDP also broadcasts rank 0's)
    worker, trainer, _ = goldminer.split(torch.jit.script(train_dlrm.ClickModel()), train_dlrm.example_batch())
    trainer.to(device)
    model = DistributedDataParallel(trainer, device_ids=[device.index] if cuda else None)
    opt = torch.optim.Adagrad(model.parameters(), lr=a.lr)
    # On a GPU the session hands batches over as CUDA tensors, received into
    # pinned memory and copied on a side stream while the step before runs.
    with goldminer.Session(a.input, batch_size=a.batch_size, program=worker, workers=a.workers, seed=a.seed,
                           rank=rank, world_size=world_size, drop_last=a.drop_last,
                           device=device if cuda else None) as session:
        offsets = torch.tensor([0] + list(session.records_per_file)).cumsum(0)
        for epoch in range(a.epochs):
            samples, batches, id_sum, loss_sum, t0 = 0, 0, 0, 0.0, time.monotonic()
            for batch in session:
                ids = session.last_sample_ids
                id_sum += int((offsets[ids[:, 0]] + ids[:, 1]).sum())
                loss = model(*batch)
                opt.zero_grad()
                loss.backward()  # the all-reduce: every rank takes this step together
                opt.step()
                samples += ids.size(0)
                batches += 1
                loss_sum += loss.item() * ids.size(0)
            digest = float(sum(p.detach().double().sum() for p in model.parameters()))
            line = json.dumps({"epoch": epoch, "rank": rank, "world_size": world_size, "samples": samples,
                               "batches": batches, "id_sum": id_sum,
                               "loss": round(loss_sum / max(samples, 1), 5), "params_digest": digest,
                               "seconds": round(time.monotonic() - t0, 3)})
            # One write per line: the ranks share stdout, and print() may
            # write the line and its newline apart (unbuffered stdout).
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--input", required=True, help="criteo-tsv:PATH[,PATH...]")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=512, help="per rank")
    p.add_argument("--workers", type=int, default=0, help="local goldminer-dw processes per rank")
    p.add_argument("--nprocs", type=int, default=0,
                   help="start this many ranks on this machine (default: this process is one rank, from "
                        "RANK/WORLD_SIZE or SLURM_PROCID/SLURM_STEP_NUM_TASKS)")
    p.add_argument("--drop-last", action="store_true")
    # Under srun rank 0 runs where srun does (block distribution): its
    # address, and a port from the job id, unless MASTER_ADDR/PORT say.
    job = int(os.environ.get("SLURM_JOB_ID", "0"))
    p.add_argument("--master-addr", default=os.environ.get("SLURM_LAUNCH_NODE_IPADDR", "127.0.0.1"))
    p.add_argument("--master-port", type=int, default=29500 + job % 1000)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    if not a.input.startswith("criteo-tsv:"):
        p.error("--input: expected criteo-tsv:PATH[,PATH...], got %r" % a.input)
    if a.nprocs > 0:
        torch.multiprocessing.spawn(train, args=(a.nprocs, a), nprocs=a.nprocs)
        return
    rank = env_int("RANK", "SLURM_PROCID")
    world_size = env_int("WORLD_SIZE", "SLURM_STEP_NUM_TASKS")
    if rank is None or world_size is None:
        p.error("no rank: give --nprocs, or run under torchrun (RANK, WORLD_SIZE) or srun")
    train(rank, world_size, a)


if __name__ == "__main__":
    main()
