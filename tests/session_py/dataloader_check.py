"""Checks goldminer.DataLoader (a Python Dataset on goldminer-dw workers) end to end.

    python3 dataloader_check.py CHECK

CHECK is one of
    epochs     a map-style dataset of dicts, tuples and strings defined in this script:
               every item once per epoch, a new order each epoch, each batch equal to
               torch's default_collate of its items, len() as torch's (also drop_last)
    kill       a worker killed (SIGKILL) mid-epoch: no item lost or repeated
    resume     state_dict() / load_state_dict(): exactly the rest of the epoch
    errors     a dataset that raises: the index, the exception and its traceback reach
               the trainer; arguments torch refuses, and an IterableDataset, are refused
    inprocess  num_workers=0: loaded in this process, as torch does
    iterable   an IterableDataset sharding by get_worker_info(): every item once per
               epoch, len() as torch's, through a worker killed mid-epoch too, and in
               process
    ranks      rank=/world_size=: each rank's loader over the same dataset and seed
               reads a share, the shares disjoint and complete, as many batches each
    model      model=: the split moves the model's stateless head to the workers;
               loader.model(*batch) equals the model on torch's batch, and trains
    wire       batches of namedtuples (of this script), OrderedDicts, bytes and
               float16 tensors, and batches each larger than the last (the worker
               maps its Python process's memory again), arrive as torch collates
               them, their structure sent as JSON; a pickle or a class outside the
               forms, as a worker's description, is refused and runs nothing

It prints what it measured, one fact a line, and exits non-zero on the first
failure (with the reason on stderr)."""

import collections
import os
import signal
import socket
import sys
import tempfile
import time

import torch
from torch.utils.data import default_collate

import goldminer
from session_check import check, fail  # beside this script


class HeldOut(torch.utils.data.Dataset):
    """Defined in the training script itself: the workers load it as __mp_main__."""

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


def same(a, b):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, dict):
        return type(a) is type(b) and list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def ids_of(batch):
    return batch["id"].tolist()


def run_epoch(loader, ds, compare=True):
    ids = []
    for batch in loader:
        batch_ids = ids_of(batch)
        if compare:
            check(same(batch, default_collate([ds[i] for i in batch_ids])),
                  "batch %s is not torch's default_collate of its items" % batch_ids[:8])
        ids.extend(batch_ids)
    return ids


def check_epochs():
    ds = HeldOut(1000)
    loader = goldminer.DataLoader(ds, batch_size=32, shuffle=True, num_workers=2)
    reference = torch.utils.data.DataLoader(ds, batch_size=32, shuffle=True)
    print("len %d, torch's %d" % (len(loader), len(reference)))
    check(len(loader) == len(reference), "len() differs from torch's")
    orders = []
    for epoch in range(2):
        loader.set_epoch(epoch)  # as with a DistributedSampler: the epoch it runs anyway, no restart
        session = loader.session
        ids = run_epoch(loader, ds)
        check(loader.session is session, "set_epoch(%d) restarted the session" % epoch)
        print("epoch %d: %d items, %d distinct of %d, shuffled: %s" %
              (epoch, len(ids), len(set(ids)), len(ds), ids != sorted(ids)))
        check(sorted(ids) == list(range(len(ds))), "epoch %d: not every item exactly once" % epoch)
        orders.append(ids)
    print("a new order each epoch: %s" % (orders[0] != orders[1]))
    check(orders[0] != orders[1], "both epochs came in the same order")
    loader.close()
    dropping = goldminer.DataLoader(ds, batch_size=64, drop_last=True, num_workers=1)
    torch_dropping = torch.utils.data.DataLoader(ds, batch_size=64, drop_last=True)
    ids = run_epoch(dropping, ds)
    print("drop_last: len %d, torch's %d, %d items in order: %s" %
          (len(dropping), len(torch_dropping), len(ids), ids == list(range(len(ids)))))
    check(len(dropping) == len(torch_dropping) and len(ids) == 15 * 64, "drop_last")
    check(ids == list(range(len(ids))), "shuffle=False did not keep the dataset's order")
    dropping.close()
    print("OK")


def check_kill():
    ds = HeldOut(600, slow_s=0.004)
    loader = goldminer.DataLoader(ds, batch_size=16, shuffle=True, num_workers=2, seed=5)
    ids = []
    killed = None
    for k, batch in enumerate(loader):
        ids.extend(ids_of(batch))
        if killed is None and k >= 4:
            # A worker that has delivered a batch, so holds leases (one that
            # has not may hold none: under load its Python child can still
            # be starting torch after the first batches, and a worker with
            # nothing in hand is not lost), while the other one has too, or
            # by batch 25 (of 38) whichever has.
            ids_delivering = {w["id"] for w in loader.session.metrics()["per_worker"] if w["batches"] > 0}
            joined = [p for p in loader.session.worker_pids
                      if "%s:%d" % (socket.gethostname(), p) in ids_delivering]
            if len(joined) >= 2 or (joined and k >= 25):
                killed, after = joined[0], k + 1
                os.kill(killed, signal.SIGKILL)
    # The loss is noticed when the transport sees the connection gone, which
    # under load can come after the epoch's last batch (the other worker
    # took over every lease): wait for it, bounded.
    metrics = loader.session.metrics()
    deadline = time.monotonic() + 30
    while killed is not None and metrics["workers_lost"] < 1 and time.monotonic() < deadline:
        time.sleep(0.1)
        metrics = loader.session.metrics()
    print("killed worker %s after %s batches: %d items, %d distinct of %d, workers lost %d" %
          (killed, after if killed else "-", len(ids), len(set(ids)), len(ds), metrics["workers_lost"]))
    check(killed is not None, "no worker had delivered a batch by batch 25")
    check(sorted(ids) == list(range(len(ds))), "an item was lost or repeated through the kill")
    check(metrics["workers_lost"] >= 1, "the killed worker was not counted as lost")
    loader.close()
    print("OK")


def check_resume():
    ds = HeldOut(300)
    first = goldminer.DataLoader(ds, batch_size=20, shuffle=True, num_workers=1, seed=9)
    taken = []
    for k, batch in enumerate(first):
        taken.extend(ids_of(batch))
        if k == 4:
            break
    state = first.state_dict()
    first.close()
    second = goldminer.DataLoader(ds, batch_size=20, shuffle=True, num_workers=2, seed=1)
    second.load_state_dict(state)
    rest = run_epoch(second, ds, compare=False)
    print("resumed: %d + %d items, %d distinct of %d" % (len(taken), len(rest), len(set(taken + rest)), len(ds)))
    check(sorted(taken + rest) == list(range(len(ds))), "the resumed loader did not give exactly the rest")
    second.close()
    print("OK")


def check_errors():
    loader = goldminer.DataLoader(HeldOut(100, bad=37), batch_size=10, num_workers=1)
    try:
        run_epoch(loader, None, compare=False)
        fail("a dataset that raises went unnoticed")
    except RuntimeError as e:
        text = str(e)
        first = text.splitlines()[0]
        print("dataset error: %s" % first)
        check("dataset[37]" in text and "ValueError: item 37 is broken" in text, "the error lacks the index: " + text)
        check("Traceback" in text and "__getitem__" in text, "the error lacks the traceback: " + text)
    finally:
        loader.close()

    for kwargs, error in [(dict(dataset=Stream(5), shuffle=True), ValueError),
                          (dict(dataset=HeldOut(5), batch_size=0), ValueError),
                          (dict(dataset=HeldOut(5), shuffle=True, sampler=range(5)), ValueError),
                          (dict(dataset=HeldOut(5), batch_sampler=[[0, 1]]), ValueError),
                          (dict(dataset=HeldOut(5), num_workers=-1), ValueError)]:
        try:
            goldminer.DataLoader(**kwargs)
            fail("accepted %r" % kwargs)
        except error as e:
            print("%s: %s: %s" % (sorted(kwargs), type(e).__name__, e))
    print("OK")


def check_inprocess():
    ds = HeldOut(100)
    loader = goldminer.DataLoader(ds, batch_size=32, shuffle=True)
    ids = run_epoch(loader, ds)
    print("in process: len %d, %d items, %d distinct" % (len(loader), len(ids), len(set(ids))))
    check(len(loader) == 4 and sorted(ids) == list(range(100)), "in-process loading")
    shares = [run_epoch(goldminer.DataLoader(ds, batch_size=8, shuffle=True, seed=2, rank=r, world_size=3), ds)
              for r in range(3)]
    print("in process, 3 ranks: %s items, %d distinct" % ([len(x) for x in shares], len(set(sum(shares, [])))))
    check([len(x) for x in shares] == [34, 34, 34] and len(set(sum(shares, []))) == 100, "in-process ranks")
    print("OK")


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


def check_iterable():
    ds = Stream(1000)
    loader = goldminer.DataLoader(ds, batch_size=32, num_workers=2, num_shards=4)
    reference = torch.utils.data.DataLoader(ds, batch_size=32, num_workers=2)
    print("iterable: len %d, torch's %d" % (len(loader), len(reference)))
    check(len(loader) == len(reference), "len() differs from torch's")
    for epoch in range(2):
        ids, batches = [], 0
        for batch in loader:
            check(torch.equal(batch["x"][:, 0], batch["id"].float()), "a batch's fields do not match")
            ids += ids_of(batch)
            batches += 1
        print("iterable epoch %d: %d batches, %d items, %d distinct of %d" %
              (epoch, batches, len(ids), len(set(ids)), ds.n))
        check(sorted(ids) == list(range(ds.n)), "epoch %d: not every item exactly once" % epoch)
    loader.close()
    slow = Stream(400, slow_s=0.004)
    killing = goldminer.DataLoader(slow, batch_size=10, num_workers=2, num_shards=4)
    ids, killed = [], None
    for k, batch in enumerate(killing):
        ids += ids_of(batch)
        if k == 3:
            killed = killing.session.worker_pids[0]
            os.kill(killed, signal.SIGKILL)
    print("iterable, a worker killed after 4 batches: %d items, %d distinct of %d, workers lost %d" %
          (len(ids), len(set(ids)), slow.n, killing.session.metrics()["workers_lost"]))
    check(sorted(ids) == list(range(slow.n)), "an item was lost or repeated through the kill")
    killing.close()
    here = run_epoch(goldminer.DataLoader(Stream(100), batch_size=16), None, compare=False)
    print("iterable in process: %d items, %d distinct" % (len(here), len(set(here))))
    check(sorted(here) == list(range(100)), "in-process iterable")
    print("OK")


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


def check_model():
    torch.manual_seed(0)
    ds = Pairs()
    model = torch.jit.script(HeadNet())
    loader = goldminer.DataLoader(ds, batch_size=32, num_workers=2, model=model,
                                  split_options=dict(trainer_device="cpu", measure=False))
    report = loader.split_report
    print("split: %d of %d nodes on the workers" % (report["nodes_moved"], report["nodes_total"]))
    check(report["nodes_moved"] > 0, "nothing of the model moved to the workers")
    reference = torch.utils.data.DataLoader(ds, batch_size=32)
    worst = 0.0
    for batch, ref in zip(loader, reference):
        worst = max(worst, abs(float(loader.model(*batch)) - float(model(*ref))))
    print("loader.model(*batch) against model(*torch's batch): worst difference %.2e" % worst)
    check(worst < 1e-5, "the split model's loss differs from the model's")
    opt = torch.optim.SGD(loader.model.parameters(), lr=0.01)
    losses = []
    for batch in loader:
        loss = loader.model(*batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
    print("trained one epoch on the workers' outputs: %d steps, loss %.3f -> %.3f" %
          (len(losses), losses[0], losses[-1]))
    check(len(losses) == 8 and losses[-1] < losses[0], "training on loader.model did not lower the loss")
    loader.close()
    print("OK")


def check_ranks():
    ds = HeldOut(500)
    loaders = [goldminer.DataLoader(ds, batch_size=16, shuffle=True, num_workers=1, seed=3, rank=r, world_size=2)
               for r in (0, 1)]
    try:
        for epoch in range(2):
            iters = [iter(l) for l in loaders]
            ids, batches = [[], []], [0, 0]
            done = [False, False]
            while not all(done):  # DDP steps the ranks together
                for r in (0, 1):
                    if done[r]:
                        continue
                    try:
                        ids[r] += ids_of(next(iters[r]))
                        batches[r] += 1
                    except StopIteration:
                        done[r] = True
            print("ranks epoch %d: batches %d %d (len %d %d), items %d + %d, %d distinct of %d" % (
                epoch, batches[0], batches[1], len(loaders[0]), len(loaders[1]), len(ids[0]), len(ids[1]),
                len(set(ids[0] + ids[1])), len(ds)))
            check(batches[0] == batches[1] == len(loaders[0]), "the ranks took different numbers of batches")
            check(sorted(ids[0] + ids[1]) == list(range(len(ds))), "the ranks did not share every item once")
    finally:
        for l in loaders:
            l.close()
    print("OK")


Sample = collections.namedtuple("Sample", "id tag")  # the workers see it as __mp_main__.Sample


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


def check_wire():
    from goldminer import _tree
    ds = Varied()
    loader = goldminer.DataLoader(ds, batch_size=16, num_workers=1)
    ids = run_epoch(loader, ds)
    print("varied batches: %d items, each as torch collates it: True" % len(ids))
    check(sorted(ids) == list(range(len(ds))), "not every item once")
    loader.close()
    grows = Growing()
    loader = goldminer.DataLoader(grows, batch_size=1, num_workers=1)
    ids = run_epoch(loader, grows)
    print("growing batches: %s, each as torch collates it: True" % ids)
    check(ids == [0, 1, 2], "growing batches: items %s" % ids)
    loader.close()
    # What a worker (or whoever poses as one) could send as the description.
    with tempfile.TemporaryDirectory() as d:
        marker = os.path.join(d, "the-pickle-ran")
        hostile = {"a pickle": b"cbuiltins\nopen\n(V" + marker.encode() + b"\nVw\ntR.",
                   "os.system as a namedtuple": b'[1,["n","os:system",[["v","touch ' + marker.encode() + b'"]]]]',
                   "eval as a dict class": b'[1,["d","builtins:eval",[]]]',
                   "a module not imported": b'[1,["n","antigravity:x",[]]]',
                   "a dunder path": b'[1,["n","collections:OrderedDict.__init__.__globals__",[]]]'}
        for what, data in hostile.items():
            try:
                _tree.from_wire(data, [])
                fail("%s was accepted as a batch description" % what)
            except _tree.BatchError as e:
                print("%s: refused (%s)" % (what, str(e)[:60]))
        ran = os.path.exists(marker)
        print("the hostile descriptions ran code: %s" % ran)
        check(not ran, "a hostile description ran code")
        check("antigravity" not in sys.modules, "a description imported a module")
    print("OK")


def main(argv):
    checks = {"epochs": check_epochs, "kill": check_kill, "resume": check_resume, "errors": check_errors,
              "inprocess": check_inprocess, "model": check_model,
              "ranks": check_ranks, "iterable": check_iterable, "wire": check_wire}
    if len(argv) != 2 or argv[1] not in checks:
        fail(__doc__)
    checks[argv[1]]()


if __name__ == "__main__":
    main(sys.argv)
