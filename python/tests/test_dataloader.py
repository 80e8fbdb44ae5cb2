"""goldminer.DataLoader end to end: a Python Dataset on goldminer-dw workers
gives what torch's DataLoader gives (every item once per epoch, batches as
default_collate makes them, len() as torch's), through a worker killed
mid-epoch, a resume, ranks, an IterableDataset, a split model and in this
process; its errors name the index; what a worker sends as a batch's
structure is strict JSON, never a pickle."""
import os
import signal
import socket
import sys
import time

import pytest
import torch

import goldminer
from dataloader_datasets import Growing, HeadNet, HeldOut, Pairs, Stream, Varied, ids_of, run_epoch


def test_every_item_once_per_epoch_in_a_new_order_collated_as_torch_does():
    ds = HeldOut(1000)
    loader = goldminer.DataLoader(ds, batch_size=32, shuffle=True, num_workers=2)
    reference = torch.utils.data.DataLoader(ds, batch_size=32, shuffle=True)
    assert len(loader) == len(reference) == 32
    orders = []
    for epoch in range(2):
        loader.set_epoch(epoch)  # as with a DistributedSampler: the epoch it runs anyway, no restart
        session = loader.session
        ids = run_epoch(loader, ds)
        assert loader.session is session, "set_epoch(%d) restarted the session" % epoch
        assert sorted(ids) == list(range(len(ds))), "epoch %d: not every item exactly once" % epoch
        assert ids != sorted(ids), "epoch %d not shuffled" % epoch
        orders.append(ids)
    assert orders[0] != orders[1], "both epochs came in the same order"
    loader.close()
    dropping = goldminer.DataLoader(ds, batch_size=64, drop_last=True, num_workers=1)
    torch_dropping = torch.utils.data.DataLoader(ds, batch_size=64, drop_last=True)
    ids = run_epoch(dropping, ds)
    assert len(dropping) == len(torch_dropping) == 15
    assert ids == list(range(15 * 64)), "shuffle=False with drop_last: not the dataset's order"
    dropping.close()


def test_batch_structures_travel_as_strict_json_never_as_a_pickle(tmp_path):
    """Batches of namedtuples, OrderedDicts, bytes and float16 tensors
    through real workers, batches of one item each larger than the last
    (16, 2^20, 2^22 floats: the worker maps its child's memory again), then
    hostile descriptions: each is refused, no file created, nothing
    imported."""
    from goldminer import _tree
    ds = Varied()
    loader = goldminer.DataLoader(ds, batch_size=16, num_workers=1)
    assert sorted(run_epoch(loader, ds)) == list(range(len(ds)))
    loader.close()
    grows = Growing()
    loader = goldminer.DataLoader(grows, batch_size=1, num_workers=1)
    assert run_epoch(loader, grows) == [0, 1, 2]
    loader.close()
    # What a worker (or whoever poses as one) could send as the description.
    marker = os.path.join(tmp_path, "the-pickle-ran")
    hostile = {
        "a pickle": (b"cbuiltins\nopen\n(V" + marker.encode() + b"\nVw\ntR.", "batch description is not JSON"),
        "os.system as a namedtuple": (b'[1,["n","os:system",[["v","touch ' + marker.encode() + b'"]]]]',
                                      "namedtuple class 'os:system': not a tuple class"),
        "eval as a dict class": (b'[1,["d","builtins:eval",[]]]', "dict class 'builtins:eval': not a dict class"),
        "a module not imported": (b'[1,["n","antigravity:x",[]]]',
                                  "namedtuple class 'antigravity:x': not a class of a mod"),
        "a dunder path": (b'[1,["n","collections:OrderedDict.__init__.__globals__",[]]]',
                          "namedtuple class 'collections:OrderedDict.__init__.__glob"),
    }
    for what, (data, reason) in hostile.items():
        with pytest.raises(_tree.BatchError) as e:
            _tree.from_wire(data, [])
        assert reason in str(e.value), what
    assert not os.path.exists(marker), "a hostile description ran code"
    assert "antigravity" not in sys.modules, "a description imported a module"


def test_a_worker_killed_mid_epoch_loses_and_repeats_nothing():
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
            delivering = {w["id"] for w in loader.session.metrics()["per_worker"] if w["batches"] > 0}
            joined = [p for p in loader.session.worker_pids if "%s:%d" % (socket.gethostname(), p) in delivering]
            if len(joined) >= 2 or (joined and k >= 25):
                killed = joined[0]
                os.kill(killed, signal.SIGKILL)
    # The loss is noticed when the transport sees the connection gone, which
    # under load can come after the epoch's last batch (the other worker
    # took over every lease): wait for it, bounded.
    deadline = time.monotonic() + 30
    while killed is not None and loader.session.metrics()["workers_lost"] < 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert killed is not None, "no worker had delivered a batch by batch 25"
    assert sorted(ids) == list(range(len(ds))), "an item was lost or repeated through the kill"
    assert loader.session.metrics()["workers_lost"] >= 1, "the killed worker was not counted as lost"
    loader.close()


def test_state_dict_resumes_with_exactly_the_rest():
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
    rest = run_epoch(second)
    second.close()
    assert (len(taken), len(rest)) == (100, 200)
    assert sorted(taken + rest) == list(range(len(ds))), "the resumed loader did not give exactly the rest"


def test_a_dataset_error_names_the_index_with_its_traceback():
    loader = goldminer.DataLoader(HeldOut(100, bad=37), batch_size=10, num_workers=1)
    try:
        with pytest.raises(RuntimeError) as e:
            run_epoch(loader)
    finally:
        loader.close()
    text = str(e.value)
    assert "dataset[37] (position 37 of epoch 0) raised ValueError: item 37 is broken" in text
    assert "Traceback" in text and "__getitem__" in text, "the error lacks the traceback: " + text


@pytest.mark.parametrize("kwargs, message", [
    (dict(dataset=Stream(5), shuffle=True), "goldminer.DataLoader: an IterableDataset takes no sampler"),
    (dict(dataset=HeldOut(5), batch_size=0), None),
    (dict(dataset=HeldOut(5), shuffle=True, sampler=range(5)), None),
    (dict(dataset=HeldOut(5), batch_sampler=[[0, 1]]), None),
    (dict(dataset=HeldOut(5), num_workers=-1), None),
], ids=["iterable_shuffle", "batch_size", "shuffle_and_sampler", "batch_sampler", "num_workers"])
def test_arguments_torch_refuses_are_refused(kwargs, message):
    with pytest.raises(ValueError) as e:
        goldminer.DataLoader(**kwargs)
    assert message is None or str(e.value).startswith(message), str(e.value)


def test_model_split_moves_its_stateless_head_to_the_workers(split_loaded):
    torch.manual_seed(0)
    ds = Pairs()
    model = torch.jit.script(HeadNet())
    loader = goldminer.DataLoader(ds, batch_size=32, num_workers=2, model=model,
                                  split_options=dict(trainer_device="cpu", measure=False))
    assert loader.split_report["nodes_moved"] > 0, "nothing of the model moved to the workers"
    reference = torch.utils.data.DataLoader(ds, batch_size=32)
    worst = 0.0
    for batch, ref in zip(loader, reference):
        worst = max(worst, abs(float(loader.model(*batch)) - float(model(*ref))))
    assert worst == 0.0, "loader.model(*batch) differs from model(*torch's batch) by %.2e" % worst
    opt = torch.optim.SGD(loader.model.parameters(), lr=0.01)
    losses = []
    for batch in loader:
        loss = loader.model(*batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
    loader.close()
    assert len(losses) == 8 and losses[-1] < losses[0], "training on loader.model did not lower the loss"


def test_an_iterable_datasets_shards_give_every_item_once_through_a_kill():
    ds = Stream(1000)
    loader = goldminer.DataLoader(ds, batch_size=32, num_workers=2, num_shards=4)
    reference = torch.utils.data.DataLoader(ds, batch_size=32, num_workers=2)
    assert len(loader) == len(reference) == 32
    for epoch in range(2):
        ids, batches = [], 0
        for batch in loader:
            assert torch.equal(batch["x"][:, 0], batch["id"].float()), "a batch's fields do not match"
            ids += ids_of(batch)
            batches += 1
        assert batches == 32
        assert sorted(ids) == list(range(ds.n)), "epoch %d: not every item exactly once" % epoch
    loader.close()
    slow = Stream(400, slow_s=0.004)
    killing = goldminer.DataLoader(slow, batch_size=10, num_workers=2, num_shards=4)
    ids = []
    for k, batch in enumerate(killing):
        ids += ids_of(batch)
        if k == 3:
            os.kill(killing.session.worker_pids[0], signal.SIGKILL)
    killing.close()
    assert sorted(ids) == list(range(slow.n)), "an item was lost or repeated through the kill"
    here = run_epoch(goldminer.DataLoader(Stream(100), batch_size=16))
    assert sorted(here) == list(range(100)), "an IterableDataset loaded in this process"


def test_ranks_share_every_item_once_with_equal_batches():
    ds = HeldOut(500)
    loaders = [goldminer.DataLoader(ds, batch_size=16, shuffle=True, num_workers=1, seed=3, rank=r, world_size=2)
               for r in (0, 1)]
    try:
        for epoch in range(2):
            iters = [iter(loader) for loader in loaders]
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
            assert batches[0] == batches[1] == len(loaders[0]) == len(loaders[1]) == 17, "epoch %d" % epoch
            assert len(ids[0]) == len(ids[1]) == 250
            assert sorted(ids[0] + ids[1]) == list(range(len(ds))), "the ranks did not share every item once"
    finally:
        for loader in loaders:
            loader.close()


def test_no_workers_loads_in_this_process_as_torch_does():
    ds = HeldOut(100)
    loader = goldminer.DataLoader(ds, batch_size=32, shuffle=True)
    ids = run_epoch(loader, ds)
    assert len(loader) == 4 and sorted(ids) == list(range(100))
    shares = [run_epoch(goldminer.DataLoader(ds, batch_size=8, shuffle=True, seed=2, rank=r, world_size=3), ds)
              for r in range(3)]
    assert [len(x) for x in shares] == [34, 34, 34]
    assert len(set(sum(shares, []))) == 100
