"""Checks the GPU hand-over of goldminer.Session and goldminer.DataLoader
(pin_memory=, device=; goldminer/_staging.py).

    python3 staging_check.py CHECK

CHECK is one of
    fallback   without CUDA (this torch, or the build, or no GPU): device="cuda"
               and pin_memory=True each say why in a RuntimeWarning, and the
               batches are the CPU batches they would be without them
    held       the position less the batches taken ahead (without_held) gives,
               resumed, exactly the rest: what the trainer had is not given
               again, what was taken ahead is
    cuda       (a torch with CUDA and a GPU) the stager hands over every
               batch in order as CUDA tensors equal to the host ones, ends each
               epoch where its source does, raises a source's error only after
               the batches before it and leaves the batches taken ahead out of
               state(); a real goldminer.Session(device="cuda") with local
               worker threads (the goldminer._session being imported, built
               --with-cuda) receives into pinned memory and does so too

Prints one fact a line; exits non-zero on the first failure."""
import os
import sys
import tempfile
import warnings

import torch

import goldminer
from session_check import BATCH, check, consume, fail, session, write_text  # beside this script


def caught(make):
    """(result, [warning texts]) of make()."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        result = make()
    return result, [str(w.message) for w in seen if issubclass(w.category, RuntimeWarning)]


def check_fallback(folder):
    if torch.cuda.is_available():
        print("fallback: skipped: this torch sees a GPU (the cuda check covers it)")
        return
    spec = write_text(folder)
    s, said = caught(lambda: session(spec, "local", 1, device="cuda"))
    print("device='cuda' warns:", said)
    check(any("device='cuda'" in w and "batches stay on the CPU" in w for w in said), "no device warning")
    check(s.device is None, "a device without CUDA")
    ids = consume(s)
    first = next(iter(s))
    check(all(t.device.type == "cpu" for t in first), "a batch not on the CPU")
    s.close()
    print("device='cuda' without CUDA: %d samples, CPU tensors" % len(ids))
    s, said = caught(lambda: session(spec, "local", 1, pin_memory=True))
    print("pin_memory warns:", said)
    check(any(w.startswith("goldminer.Session: pin_memory: ") and w.endswith("receive buffers stay pageable")
              for w in said), "no pin_memory warning")
    check(s.receive_memory.startswith("pageable"), "receive memory " + s.receive_memory)
    s.close()
    try:
        session(spec, "local", 1, device="tpu")
        fail("device='tpu' was taken")
    except ValueError as e:
        check(str(e).startswith("goldminer.Session: device 'tpu': "), "device='tpu': " + str(e))
        print("device='tpu':", e)
    ds = [torch.tensor([i]) for i in range(10)]
    loader, said = caught(lambda: goldminer.DataLoader(ds, batch_size=4, device="cuda"))
    check(any("goldminer.DataLoader: device='cuda'" in w for w in said), "no DataLoader warning")
    got = [b for b in loader]
    check([b.device.type for b in got] == ["cpu"] * 3 and torch.cat(got).view(-1).tolist() == list(range(10)),
          "DataLoader batches without CUDA")
    print("DataLoader(device='cuda') without CUDA: 3 CPU batches")
    print("OK")


def check_held(folder):
    from goldminer._staging import without_held
    spec = write_text(folder)
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
    check(identity == s.last_batch and ids.size(0) == batch[1].numel(), "_pull_host: %r" % (identity,))
    state = without_held(s.state(), held)
    s.close()
    print("held batches:", held)
    r = session(spec, "local", 2, deterministic=True, resume=state)
    rest = consume(r)
    r.close()
    every = had + rest
    check(len(every) == total and len(set(every)) == total, "had + rest: %d samples, %d unique, %d total"
          % (len(every), len(set(every)), total))
    check(set(ahead) <= set(rest), "a batch taken ahead was not given again")
    print("had %d + rest %d = %d, unique %d; taken ahead given again: True" % (len(had), len(rest), len(every),
                                                                            len(set(every))))
    # A held batch that ended its split takes the split out of `done`.
    st = {"epoch": 0, "seed": 1, "plan": 2, "bad_records": 0, "done": [4, 5], "partial": [[6, 2]]}
    adj = without_held(st, [(0, 5, 3), (0, 6, 1), (0, 9, 0)])
    check(adj["done"] == [4] and sorted(adj["partial"]) == [[5, 3], [6, 1]], "without_held: %r" % (adj,))
    print("without_held:", adj)
    print("OK")


def check_cuda(folder):
    if not torch.cuda.is_available():
        print("cuda: skipped: this torch has no CUDA or sees no GPU")
        return
    from goldminer import _staging
    dev = _staging.cuda_device("cuda", "staging_check")
    print("device:", dev, torch.cuda.get_device_name(dev))
    # A source of host batches (pinned, as the session's receive buffers),
    # 3 epochs of 9 batches, each (dict, tensor); in the 2nd epoch, taking
    # batch 5 fails once (a timeout, say), then gives it.
    epochs = [[({"x": torch.full((64, 1024), e * 100 + k, dtype=torch.float32).pin_memory(),
                 "y": torch.arange(64) + k}, torch.tensor([e, k])) for k in range(9)] for e in range(3)]
    state = {"epoch": 0, "k": 0, "fail": (1, 5)}
    released = []  # (epoch, k) of host batches whose copy event had not completed when dropped

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
            check(d["x"].is_cuda and d["y"].is_cuda and t.is_cuda, "a batch not on the GPU")
            work.mul_(1.0)  # the trainer's step on its stream, while the next copy runs
            check(torch.equal(d["x"].cpu(), epochs[e][len(got)][0]["x"]), "batch %d of epoch %d differs" % (len(got), e))
            got.append(tuple(t.cpu().tolist()))
            if e == 2 and len(got) == 4:
                held = stager.held()
                st = stager.adjust({"epoch": 2, "seed": 0, "plan": 0, "bad_records": 0, "done": [],
                                    "partial": [[7, 4 + len(held)]]})
                check(st["partial"] == [[7, 4]], "state with %d held: %r" % (len(held), st))
                print("epoch 2 after 4 batches: %d taken ahead, state %r" % (len(held), st["partial"]))
        check(got == [(e, k) for k in range(9)], "epoch %d: %r" % (e, got))
        check(error == (None if e != 1 else "source error at batch 5 (after 5 batches)"), "epoch %d error %r" % (e, error))
        print("epoch %d: %d batches in order on %s%s" % (e, len(got), dev,
                                                        ", then the source's error: " + error if error else ""))
    torch.cuda.synchronize()
    check(not stager.held(), "batches left taken ahead")
    check_cuda_session(dev, folder)
    print("OK")


CUDA_LINES = ["line-%02d:" % r + "x" * (r % 7) for r in range(24)]


def session_batches(path, device, n=None):
    """A real goldminer.Session with one local worker thread over CUDA_LINES,
    batches of 4 in input order, 2 splits of 3 batches: (the session, the
    record numbers of each batch, the state() after 2 batches); `n` batches
    (all of the epoch when None). Each batch's lines are checked against the
    records its last_sample_ids name."""
    s = goldminer.Session("text:" + path, 4, workers=1, transport="local", device=device, deterministic=True,
                          shuffle_splits=False, records_per_split=12, seed=0)
    got, state, held = [], None, 0
    for data, lengths in s:
        if device is not None:
            check(data.device == s.device and lengths.device == s.device, "a Session batch not on %s: %s, %s"
                  % (s.device, data.device, lengths.device))
        ids = s.last_sample_ids
        check(ids.device.type == "cpu", "last_sample_ids on %s" % ids.device)
        blob, cut = bytes(data.cpu().tolist()), [0]
        for n_bytes in lengths.cpu().tolist():
            cut.append(cut[-1] + n_bytes)
        texts = [blob[a:b].decode() for a, b in zip(cut, cut[1:])]
        records = [r for _, r in ids.tolist()]
        check(texts == [CUDA_LINES[r] for r in records], "batch %d: lines %r for records %r"
              % (len(got), texts, records))
        got.append(records)
        if len(got) == 2:
            held = len(s._stager.held()) if s._stager is not None else 0
            state = s.state()
        if n is not None and len(got) == n:
            break
    return s, got, state, held


def check_cuda_session(dev, folder):
    """The real goldminer.Session(device=) of the installed package (its C++
    extension, built --with-cuda, registering the receive buffers with CUDA),
    with local worker threads: pinned receive memory, batches on the GPU in
    order with the lines their last_sample_ids name, state() after 2 batches
    equal to a CPU session's after the same 2 (what was taken ahead left
    out), and a session resumed from it gives exactly the other batches."""
    path = os.path.join(folder, "cuda_lines.txt")
    with open(path, "w") as f:
        f.write("".join(line + "\n" for line in CUDA_LINES))
    s, got, state, held = session_batches(path, "cuda")
    print("Session(device='cuda') receive memory:", s.receive_memory)
    check(s.receive_memory.startswith("pinned"), "receive memory %r, warnings %r"
          % (s.receive_memory, s.receive_memory_warnings))
    s.close()
    check(got == [list(range(4 * k, 4 * k + 4)) for k in range(6)], "Session batches %r" % (got,))
    cpu, cpu_got, cpu_state, _ = session_batches(path, None, 2)
    cpu.close()
    check(state == cpu_state, "state after 2 batches with device='cuda' (%d taken ahead) %r, without %r"
          % (held, state, cpu_state))
    print("state after 2 batches (%d more taken ahead): %r" % (held, state))
    r = goldminer.Session("text:" + path, 4, workers=1, transport="local", deterministic=True, shuffle_splits=False,
                          records_per_split=12, seed=0, device="cuda", resume=state)
    rest = [[rec for _, rec in r.last_sample_ids.tolist()] for _ in r]
    r.close()
    check(rest == got[2:], "resumed from that state: %r" % (rest,))
    print("Session(device='cuda'): 6 batches in order on %s, state less the batches taken ahead" % dev)
    print("resumed with device='cuda': the other %d batches" % len(rest))


def main(argv):
    checks = {"fallback": check_fallback, "held": check_held, "cuda": check_cuda}
    if len(argv) < 2 or argv[1] not in checks:
        fail(__doc__)
    with tempfile.TemporaryDirectory(prefix="goldminer-staging.") as folder:
        checks[argv[1]](folder)


if __name__ == "__main__":
    main(sys.argv)
