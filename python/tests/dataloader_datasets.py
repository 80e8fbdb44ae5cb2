"""The datasets and models of the goldminer.DataLoader tests, in a module of
their own: the loader pickles them by reference, and its workers import
this module from the trainer's sys.path (which pytest puts this folder on),
as they would a user's module on a cluster's shared file system."""
import collections
import time

import torch
from torch.utils.data import default_collate


class HeldOut(torch.utils.data.Dataset):
    """n items of dicts, tuples, tensors and strings; item `bad` raises."""

    def __init__(self, n, slow_s=0.0, bad=None):
        self.n, self.slow_s, self.bad = n, slow_s, bad

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if not 0 <= i < self.n:
            raise IndexError(i)
        if i == self.bad:
            raise ValueError("item %d is broken" % i)
        if self.slow_s:
            time.sleep(self.slow_s)
        g = torch.Generator().manual_seed(i)
        return {"id": i, "image": torch.rand(3, 4, 4, generator=g),
                "pair": (torch.tensor([i, -i], dtype=torch.int32), i / 2.0), "name": "item-%d" % i}


class Stream(torch.utils.data.IterableDataset):
    """Items 0..n-1, sharded by get_worker_info() as torch's documentation shows."""

    def __init__(self, n, slow_s=0.0):
        self.n, self.slow_s = n, slow_s

    def __len__(self):
        return self.n

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        shard, shards = (info.id, info.num_workers) if info is not None else (0, 1)
        for i in range(shard, self.n, shards):
            if self.slow_s:
                time.sleep(self.slow_s)
            yield {"id": i, "x": torch.tensor([float(i)])}


class Pairs(torch.utils.data.Dataset):
    """(x float32 [8], y float32) items for a model with a stateless head."""

    def __len__(self):
        return 256

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return torch.randn(8, generator=g) * 10, torch.tensor(float(i % 7))


class HeadNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 1)

    def forward(self, x, y):
        h = torch.log1p(x.abs()) * torch.sign(x) + 0.5  # reads no parameter: the workers' part
        return torch.nn.functional.mse_loss(self.lin(h).squeeze(1), y)


Sample = collections.namedtuple("Sample", "id tag")


class Varied(torch.utils.data.Dataset):
    """Items of the forms a batch description carries besides plain tensors."""

    def __len__(self):
        return 100

    def __getitem__(self, i):
        return {"id": i, "half": torch.full((2,), i, dtype=torch.float16), "sample": Sample(i, "s%d" % i),
                "raw": bytes([i]), "ordered": collections.OrderedDict(a=i, b=-i)}


class Growing(torch.utils.data.Dataset):
    """Items of 16, 2**20 and 2**22 float32 values: each batch (of one) needs
    more of the worker's shared memory with its Python process than the
    last, and lies past the worker's mapping of it."""

    def __len__(self):
        return 3

    def __getitem__(self, i):
        return {"id": i, "values": torch.arange((16, 1 << 20, 1 << 22)[i], dtype=torch.float32) + i}


def same(a, b):
    """Equal as torch's collate makes them: types, dtypes, shapes, values."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, dict):
        return type(a) is type(b) and list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def ids_of(batch):
    return batch["id"].tolist()


def run_epoch(loader, ds=None):
    """The item ids of one epoch of `loader`; with `ds`, each batch is
    asserted to be torch's default_collate of its items."""
    ids = []
    for batch in loader:
        batch_ids = ids_of(batch)
        if ds is not None:
            assert same(batch, default_collate([ds[i] for i in batch_ids])), \
                "batch %s is not torch's default_collate of its items" % batch_ids[:8]
        ids.extend(batch_ids)
    return ids
