"""The GPU hand-over of goldminer.Session and goldminer.DataLoader
(pin_memory=, device=; goldminer/_staging.py): without CUDA each says why
and stays on the CPU; the position less the batches taken ahead resumes
exactly; with a torch that has CUDA and a GPU, batches are handed over on
the GPU in order (bench/device/cuda_checks.sh runs these on the device
machine). A check that cannot run here skips saying why."""
import os
import warnings

import pytest
import torch

import goldminer
from session_inputs import consume, session, write_text


def caught(make):
    """(result, [RuntimeWarning texts]) of make()."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        result = make()
    return result, [str(w.message) for w in seen if issubclass(w.category, RuntimeWarning)]


def test_without_cuda_device_and_pin_memory_warn_and_stay_on_the_cpu(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("this torch sees a GPU (the cuda test covers it)")
    spec = write_text(tmp_path)
    s, said = caught(lambda: session(spec, "local", 1, device="cuda"))
    assert any(w.startswith("goldminer.Session: device='cuda': ") and "batches stay on the CPU" in w
               for w in said), said
    assert s.device is None
    ids = consume(s)
    first = next(iter(s))
    s.close()
    assert len(ids) == 1537
    assert all(t.device.type == "cpu" for t in first)
    s, said = caught(lambda: session(spec, "local", 1, pin_memory=True))
    assert any(w.startswith("goldminer.Session: pin_memory: ") and w.endswith("receive buffers stay pageable")
               for w in said), said
    assert s.receive_memory.startswith("pageable")
    s.close()
    with pytest.raises(ValueError) as e:
        session(spec, "local", 1, device="tpu")
    assert str(e.value).startswith("goldminer.Session: device 'tpu': ")
    ds = [torch.tensor([i]) for i in range(10)]
    loader, said = caught(lambda: goldminer.DataLoader(ds, batch_size=4, device="cuda"))
    assert any("goldminer.DataLoader: device='cuda'" in w for w in said), said
    got = list(loader)
    assert [b.device.type for b in got] == ["cpu"] * 3
    assert torch.cat(got).view(-1).tolist() == list(range(10))


def test_the_position_less_the_batches_taken_ahead_resumes_exactly(tmp_path):
    from goldminer._staging import without_held
    spec = write_text(tmp_path)
    s = session(spec, "local", 2, deterministic=True)
    total = s.total_records
    had = consume(s, 7)  # the trainer's
    held, ahead = [], []  # taken ahead, as the stager takes them
    for _ in range(3):
        next(s)
        held.append(s.last_batch)
        ahead.extend((int(f), int(r)) for f, r in s.last_sample_ids.tolist())
    # What the stager takes from a session: the batch, its identity, its ids.
    batch, identity, ids = s._pull_host()
    held.append(identity)
    ahead.extend((int(f), int(r)) for f, r in ids.tolist())
    assert identity == s.last_batch and ids.size(0) == batch[1].numel(), "_pull_host: %r" % (identity,)
    state = without_held(s.state(), held)
    s.close()
    r = session(spec, "local", 2, deterministic=True, resume=state)
    rest = consume(r)
    r.close()
    assert (len(had), len(rest)) == (364, 1173)
    assert len(had + rest) == total and len(set(had + rest)) == total
    assert set(ahead) <= set(rest), "a batch taken ahead was not given again"
    # A held batch that ended its split takes the split out of `done`.
    st = {"epoch": 0, "seed": 1, "plan": 2, "bad_records": 0, "done": [4, 5], "partial": [[6, 2]]}
    adj = without_held(st, [(0, 5, 3), (0, 6, 1), (0, 9, 0)])
    assert adj["done"] == [4] and sorted(adj["partial"]) == [[5, 3], [6, 1]]
    assert {k: adj[k] for k in ["epoch", "seed", "plan", "bad_records"]} == {"epoch": 0, "seed": 1, "plan": 2,
                                                                            "bad_records": 0}


def test_batches_are_handed_over_on_the_gpu_copied_ahead(tmp_path):
    """The stager hands over every batch in order as CUDA tensors equal to
    the host ones, ends each epoch where its source does, raises a source's
    error only after the batches before it and leaves the batches taken
    ahead out of state(); a real Session(device="cuda") does so too."""
    if not torch.cuda.is_available():
        pytest.skip("this torch has no CUDA or sees no GPU")
    from goldminer import _staging
    dev = _staging.cuda_device("cuda", "test_staging")
    check_stager(_staging, dev)
    check_session_on_the_gpu(dev, tmp_path)


def check_stager(_staging, dev):
    """A source of host batches (pinned, as the session's receive buffers),
    3 epochs of 9 batches, each (dict, tensor); in the 2nd epoch, taking
    batch 5 fails once (a timeout, say), then gives it."""
    epochs = [[({"x": torch.full((64, 1024), e * 100 + k, dtype=torch.float32).pin_memory(),
                 "y": torch.arange(64) + k}, torch.tensor([e, k])) for k in range(9)] for e in range(3)]
    state = {"epoch": 0, "k": 0, "fail": (1, 5)}

    def pull():
        e, k = state["epoch"], state["k"]
        if k == len(epochs[e]):
            state["epoch"], state["k"] = e + 1, 0
            raise StopIteration
        if (e, k) == state["fail"]:
            state["fail"] = None
            raise RuntimeError("source error at batch %d" % k)
        state["k"] = k + 1
        return epochs[e][k], (e, 7, k), (e, k)

    stager = _staging.Stager(pull, lambda: 1 if state["k"] <= len(epochs[state["epoch"]]) else 0, dev, prefetch=2)
    work = torch.empty((4096, 4096), device=dev)
    for e in range(3):
        got, error = [], None
        while True:
            try:
                batch = next(stager)
            except StopIteration:
                break
            except RuntimeError as err:  # in its turn: after the batches before it
                error = "%s (after %d batches)" % (err, len(got))
                continue
            d, t = batch
            assert d["x"].is_cuda and d["y"].is_cuda and t.is_cuda, "a batch not on the GPU"
            work.mul_(1.0)  # the trainer's step on its stream, while the next copy runs
            assert torch.equal(d["x"].cpu(), epochs[e][len(got)][0]["x"]), "batch %d of epoch %d" % (len(got), e)
            got.append(tuple(t.cpu().tolist()))
            if e == 2 and len(got) == 4:
                held = stager.held()
                st = stager.adjust({"epoch": 2, "seed": 0, "plan": 0, "bad_records": 0, "done": [],
                                    "partial": [[7, 4 + len(held)]]})
                assert st["partial"] == [[7, 4]], "state with %d held: %r" % (len(held), st)
        assert got == [(e, k) for k in range(9)], "epoch %d" % e
        assert error == (None if e != 1 else "source error at batch 5 (after 5 batches)"), "epoch %d" % e
    torch.cuda.synchronize()
    assert not stager.held(), "batches left taken ahead"


CUDA_LINES = ["line-%02d:" % r + "x" * (r % 7) for r in range(24)]


def session_batches(path, device, n=None):
    """A real goldminer.Session with one local worker thread over CUDA_LINES,
    batches of 4 in input order, 2 splits of 3 batches: (the session, the
    record numbers of each batch, the state() after 2 batches, the batches
    then taken ahead); `n` batches (all of the epoch when None). Each
    batch's lines are checked against the records its last_sample_ids name."""
    s = goldminer.Session("text:" + path, 4, workers=1, transport="local", device=device, deterministic=True,
                          shuffle_splits=False, records_per_split=12, seed=0)
    got, state, held = [], None, 0
    for data, lengths in s:
        if device is not None:
            assert data.device == s.device and lengths.device == s.device
        ids = s.last_sample_ids
        assert ids.device.type == "cpu"
        blob, cut = bytes(data.cpu().tolist()), [0]
        for n_bytes in lengths.cpu().tolist():
            cut.append(cut[-1] + n_bytes)
        texts = [blob[a:b].decode() for a, b in zip(cut, cut[1:])]
        records = [r for _, r in ids.tolist()]
        assert texts == [CUDA_LINES[r] for r in records], "batch %d" % len(got)
        got.append(records)
        if len(got) == 2:
            held = len(s._stager.held()) if s._stager is not None else 0
            state = s.state()
        if n is not None and len(got) == n:
            break
    return s, got, state, held


def check_session_on_the_gpu(dev, folder):
    """The real goldminer.Session(device=) of the package under test (its
    C++ extension, built --with-cuda, registering the receive buffers with
    CUDA), with local worker threads: pinned receive memory, batches on the
    GPU in order with the lines their last_sample_ids name, state() after 2
    batches equal to a CPU session's after the same 2 (what was taken ahead
    left out), and a session resumed from it gives exactly the other
    batches."""
    path = os.path.join(folder, "cuda_lines.txt")
    with open(path, "w") as f:
        f.write("".join(line + "\n" for line in CUDA_LINES))
    s, got, state, held = session_batches(path, "cuda")
    memory, memory_warnings = s.receive_memory, s.receive_memory_warnings
    s.close()
    assert memory.startswith("pinned"), "receive memory %r, warnings %r" % (memory, memory_warnings)
    assert got == [list(range(4 * k, 4 * k + 4)) for k in range(6)]
    cpu, _, cpu_state, _ = session_batches(path, None, 2)
    cpu.close()
    assert state == cpu_state, "state after 2 batches with device='cuda' (%d taken ahead)" % held
    r = goldminer.Session("text:" + path, 4, workers=1, transport="local", deterministic=True, shuffle_splits=False,
                          records_per_split=12, seed=0, device="cuda", resume=state)
    rest = [[rec for _, rec in r.last_sample_ids.tolist()] for _ in r]
    r.close()
    assert rest == got[2:], "resumed from the state after 2 batches"
