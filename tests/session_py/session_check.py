"""Checks goldminer.Session (the goldminer._session extension) end to end.

    python3 session_check.py CHECK [ARGS...]

CHECK is one of
    epochs FORMAT TRANSPORT WORKERS EPOCHS   every sample exactly once per epoch,
                                             tensor dtypes, shapes and values
    zerocopy TRANSPORT                       batches are views of the received buffer
    program TRANSPORT KIND                   a worker program (KIND: module, path, bytes)
                                             gives what it gives run here on the same batch
    resume TRANSPORT                         state() + resume= give exactly the rest
    deterministic TRANSPORT                  deterministic=True: one order whatever the workers,
                                             and a resumed run continues it
    errors                                   bad input, bad arguments
    metrics                                  metrics(), drain_workers(), worker lifetime
    environment                              GOLDMINER_* variables, secret, external workers
    ranks TRANSPORT                          rank=/world_size= (and RANK/WORLD_SIZE): every sample
                                             on one rank, the same len() and batches on each
    ddp                                      examples/train_dlrm_ddp.py, 2 ranks under DDP (gloo):
                                             every sample on one rank, the ranks in step

Each check writes its own small input files (text lines, Criteo-like TSV) in a
temporary folder, prints what it measured, one fact a line, and exits non-zero
on the first failure (with the reason on stderr). The helpers and the checks of
one session are here; ranks and ddp are in session_check_ranks.py."""
import inspect
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

import torch

import goldminer

BATCH = 64
SPLIT = 100  # records per split: several splits per file, a short last batch per split


def fail(message):
    sys.stderr.write("FAIL: %s\n" % message)
    sys.exit(1)


def check(cond, message):
    if not cond:
        fail(message)


# ---------------------------------------------------------------- input data
TEXT_RECORDS = [1000, 537]
CRITEO_RECORDS = [600, 411]


def text_line(f, r):
    if r % 97 == 13:
        return ""  # empty lines are records too
    return "f%d-r%d:" % (f, r) + "x" * ((r * 7 + f) % 23)


def write_text(folder):
    paths = []
    for f, n in enumerate(TEXT_RECORDS):
        path = os.path.join(folder, "lines_%d.txt" % f)
        with open(path, "w") as out:
            for r in range(n):
                out.write(text_line(f, r) + ("\r\n" if r % 5 == 0 else "\n"))
        paths.append(path)
    return "text:" + ",".join(paths)


def criteo_row(f, r):
    """(label, dense[13] (None = missing), sparse[26] (None = missing), fields)."""
    label = float((r + f) % 2)
    dense = [None if (r + j) % 11 == 0 else float((f * 1000 + r * 3 + j) % 50) for j in range(13)]
    sparse = [None if (r * j + f) % 13 == 5 else ((f << 40) ^ (r << 8) ^ j) * 2654435761 % (1 << 48)
              for j in range(26)]
    fields = 40 if r % 17 != 3 else 38  # short rows: trailing categoricals missing
    if fields == 38:
        sparse[24] = sparse[25] = None
    return label, dense, sparse, fields


def criteo_line(f, r):
    label, dense, sparse, fields = criteo_row(f, r)
    parts = ["%d" % label] + ["" if d is None else "%d" % d for d in dense] + \
            ["" if s is None else "%x" % s for s in sparse]
    return "\t".join(parts[:fields])


def write_criteo(folder, corrupt_at=None):
    paths = []
    for f, n in enumerate(CRITEO_RECORDS):
        path = os.path.join(folder, "day_%d.tsv" % f)
        with open(path, "w") as out:
            for r in range(n):
                line = criteo_line(f, r)
                if corrupt_at == (f, r):
                    line = line.replace("\t", "\tnot-a-number", 1)
                out.write(line + "\n")
        paths.append(path)
    return "criteo-tsv:" + ",".join(paths)


def criteo_expected(f, r):
    label, dense, sparse, _ = criteo_row(f, r)
    return (torch.tensor(label, dtype=torch.float32),
            torch.tensor([float("nan") if d is None else d for d in dense], dtype=torch.float32),
            torch.tensor([-1 if s is None else s for s in sparse], dtype=torch.int64))


def records(fmt):
    return TEXT_RECORDS if fmt == "text" else CRITEO_RECORDS


def write_input(fmt, folder):
    return write_text(folder) if fmt == "text" else write_criteo(folder)


# ---------------------------------------------------------------- batch checks
def same(a, b):
    if a.dtype.is_floating_point:
        return torch.equal(torch.isnan(a), torch.isnan(b)) and torch.equal(torch.nan_to_num(a), torch.nan_to_num(b))
    return torch.equal(a, b)


def check_batch(fmt, batch, ids):
    """Checks one batch against the input; returns the sample ids as (f, r) tuples."""
    check(isinstance(batch, tuple), "a batch is a %s, not a tuple" % type(batch).__name__)
    check(all(isinstance(t, torch.Tensor) for t in batch), "a batch holds something other than tensors")
    check(ids.dtype == torch.int64 and ids.dim() == 2 and ids.shape[1] == 2, "last_sample_ids %s %s" %
          (ids.dtype, tuple(ids.shape)))
    b = ids.shape[0]
    samples = [(int(f), int(r)) for f, r in ids.tolist()]
    if fmt == "text":
        check(len(batch) == 2, "text batch has %d tensors" % len(batch))
        data, lengths = batch
        check(data.dtype == torch.uint8 and data.dim() == 1, "text data %s %s" % (data.dtype, tuple(data.shape)))
        check(lengths.dtype == torch.int64 and tuple(lengths.shape) == (b,),
              "text lengths %s %s" % (lengths.dtype, tuple(lengths.shape)))
        check(int(lengths.sum()) == data.numel(), "text lengths do not add up to the data")
        raw = bytes(data.tolist())
        pos = 0
        for (f, r), n in zip(samples, lengths.tolist()):
            line = raw[pos:pos + n].decode()
            pos += n
            check(line == text_line(f, r), "sample (%d, %d) is %r, expected %r" % (f, r, line, text_line(f, r)))
    else:
        check(len(batch) == 3, "criteo batch has %d tensors" % len(batch))
        label, dense, sparse = batch
        check(label.dtype == torch.float32 and tuple(label.shape) == (b,),
              "label %s %s" % (label.dtype, tuple(label.shape)))
        check(dense.dtype == torch.float32 and tuple(dense.shape) == (b, 13),
              "dense %s %s" % (dense.dtype, tuple(dense.shape)))
        check(sparse.dtype == torch.int64 and tuple(sparse.shape) == (b, 26),
              "sparse %s %s" % (sparse.dtype, tuple(sparse.shape)))
        for i, (f, r) in enumerate(samples):
            el, ed, es = criteo_expected(f, r)
            check(same(label[i], el) and same(dense[i], ed) and same(sparse[i], es),
                  "sample (%d, %d) decoded as %s %s %s, expected %s %s %s" %
                  (f, r, label[i], dense[i].tolist(), sparse[i].tolist(), el, ed.tolist(), es.tolist()))
    return samples


class EpochCount:
    def __init__(self, fmt):
        self.expected = {(f, r) for f, n in enumerate(records(fmt)) for r in range(n)}
        self.seen = set()
        self.duplicates = 0
        self.samples = 0
        self.batches = 0

    def add(self, samples):
        self.batches += 1
        for s in samples:
            self.samples += 1
            if s in self.seen or s not in self.expected:
                self.duplicates += 1
            self.seen.add(s)

    def missing(self):
        return len(self.expected - self.seen)

    def line(self, epoch):
        return ("epoch %d: samples %d unique %d duplicates %d missing %d" %
                (epoch, self.samples, len(self.seen), self.duplicates, self.missing()))

    def exact(self):
        return self.duplicates == 0 and self.missing() == 0


def session(spec, transport, workers, **kw):
    kw.setdefault("records_per_split", SPLIT)
    return goldminer.Session(spec, BATCH, workers=workers, transport=transport, **kw)


# ---------------------------------------------------------------- checks
def check_epochs(folder, fmt, transport, workers, epochs):
    spec = write_input(fmt, folder)
    with session(spec, transport, int(workers), seed=3, shuffle_buffer=50) as s:
        check(s.total_records == sum(records(fmt)), "total_records %d" % s.total_records)
        check(s.records_per_file == records(fmt), "records_per_file %s" % s.records_per_file)
        print("total_records %d" % s.total_records)
        for e in range(int(epochs)):
            count = EpochCount(fmt)
            for batch in s:
                count.add(check_batch(fmt, batch, s.last_sample_ids))
            print(count.line(e))
            check(count.exact(), "epoch %d not exactly once: %s" % (e, count.line(e)))
            check(s.state()["epoch"] == e + 1, "state() after epoch %d: %s" % (e, s.state()))
        print("dtypes " + " ".join(str(t.dtype).replace("torch.", "") for t in batch))
    print("OK")


def check_zerocopy(folder, transport):
    """Each tensor of a batch (and its sample ids) is a view of the received
    buffer: they lie back to back in it, each 64-byte aligned, as the wire
    laid them out (copies would be allocations of their own), and looking
    at the sample ids twice gives the same memory."""
    spec = write_text(folder)
    s = session(spec, transport, 2)
    held = None
    batches = 0
    for epoch in range(2):
        for batch in s:
            batches += 1
            ids = s.last_sample_ids
            views = sorted((t for t in list(batch) + [ids] if t.numel() > 0), key=lambda t: t.data_ptr())
            end = None
            for t in views:
                check(t.data_ptr() % 64 == 0, "tensor at %#x not 64-byte aligned" % t.data_ptr())
                check(end is None or t.data_ptr() == (end + 63) // 64 * 64,
                      "tensor at %#x not next to the one before it (ends at %#x)" % (t.data_ptr(), end or 0))
                end = t.data_ptr() + t.numel() * t.element_size()
                check(t.is_contiguous() and not t.requires_grad and t.device.type == "cpu",
                      "not a plain contiguous CPU tensor")
            check(s.last_sample_ids.data_ptr() == ids.data_ptr(), "sample ids copied on a second look")
            if held is None:
                held = (batch, ids, [t.clone() for t in batch], ids.clone())
    print("batches %d, len(session) %d per epoch" % (batches, len(s)))
    check(batches == 2 * len(s), "2 epochs gave %d batches, len(session) says %d each" % (batches, len(s)))
    print("back to back in the received buffer: yes")
    print("64-byte aligned: yes")
    batch, ids, copies, id_copy = held
    check(all(torch.equal(a, b) for a, b in zip(batch, copies)) and torch.equal(ids, id_copy),
          "a held batch changed while the session went on")
    print("held batch intact after 2 epochs: yes")
    s.close()
    check(all(torch.equal(a, b) for a, b in zip(batch, copies)) and torch.equal(ids, id_copy),
          "a held batch changed when the session closed")
    print("held batch intact after close: yes")
    # Writable views of this batch only.
    batch[1][0] = 12345
    check(int(batch[1][0]) == 12345, "write to a batch tensor lost")
    print("OK")


class WorkerProgram(torch.nn.Module):
    def forward(self, label, dense, sparse):
        d = torch.nan_to_num(dense, nan=0.0)
        d = torch.log1p(d) - d.mean(0, keepdim=True)  # depends on the whole batch
        return label.unsqueeze(1), d, torch.remainder(sparse, 1000), torch.tensor([label.shape[0]])


def check_program(folder, transport, kind):
    spec = write_criteo(folder)
    module = torch.jit.script(WorkerProgram())
    if kind == "module":
        program = module
    else:
        buffer = io.BytesIO()
        torch.jit.save(module, buffer)
        program = buffer.getvalue()
        if kind == "path":
            program = os.path.join(folder, "worker.pt")
            with open(program, "wb") as out:
                out.write(buffer.getvalue())
    rows = {}
    for f, n in enumerate(CRITEO_RECORDS):
        for r in range(n):
            rows[(f, r)] = criteo_expected(f, r)
    count = EpochCount("criteo")
    with session(spec, transport, 2, program=program, seed=5, shuffle_buffer=30) as s:
        for out in s:
            ids = [(int(f), int(r)) for f, r in s.last_sample_ids.tolist()]
            count.add(ids)
            inputs = [torch.stack([rows[i][k] for i in ids]) for k in range(3)]
            want = module(*inputs)
            check(len(out) == len(want), "program gave %d tensors, expected %d" % (len(out), len(want)))
            for got, exp in zip(out, want):
                check(got.dtype == exp.dtype and got.shape == exp.shape,
                      "output %s %s, expected %s %s" % (got.dtype, tuple(got.shape), exp.dtype, tuple(exp.shape)))
                ok = torch.allclose(got, exp, rtol=1e-6, atol=1e-6) if got.dtype.is_floating_point \
                    else torch.equal(got, exp)
                check(ok, "program output differs from running it here on the same batch")
    print(count.line(0))
    check(count.exact(), "program epoch not exactly once")
    print("program outputs match: %d batches" % count.batches)
    print("output dtypes " + " ".join(str(t.dtype).replace("torch.", "") for t in out))
    print("OK")


def consume(s, n=None):
    """Sample ids of up to n batches (all of the epoch when n is None)."""
    ids = []
    for k, _ in enumerate(s):
        ids.extend((int(f), int(r)) for f, r in s.last_sample_ids.tolist())
        if n is not None and k + 1 == n:
            break
    return ids


def check_resume(folder, transport):
    spec = write_text(folder)
    total = sum(TEXT_RECORDS)
    with session(spec, transport, 2, seed=7, shuffle_buffer=20) as s:
        first = consume(s, 7)
        position = json.loads(json.dumps(s.state()))  # plain data
    check(sorted(position) == ["bad_records", "done", "epoch", "partial", "plan", "seed"], "state() keys %s" % sorted(position))
    check(position["seed"] == 7 and position["epoch"] == 0, "state() %s" % position)
    print("state after 7 batches: epoch %d, %d done, %d partial" %
          (position["epoch"], len(position["done"]), len(position["partial"])))
    with session(spec, transport, 2, shuffle_buffer=20, resume=position) as s:
        rest = consume(s)
        check(s.state()["epoch"] == 1, "state() after the resumed epoch: %s" % s.state())
        following = consume(s)
    overlap = len(set(first) & set(rest))
    union = set(first) | set(rest)
    print("resumed: first %d + rest %d = %d, overlap %d, duplicates %d, missing %d" %
          (len(first), len(rest), len(first) + len(rest), overlap,
           len(first) + len(rest) - len(union), total - len(union)))
    check(len(first) + len(rest) == total and len(union) == total, "resume did not give exactly the rest")
    print("next epoch: %d samples, %d unique" % (len(following), len(set(following))))
    check(len(following) == total and len(set(following)) == total, "the epoch after the resumed one")
    try:
        session(spec, transport, 0, seed=8, resume=position)
        fail("resume with another seed was accepted")
    except RuntimeError as e:
        check("seed" in str(e), "resume seed error: %s" % e)
        print("resume with another seed: RuntimeError")
    try:
        goldminer.Session(spec, batch_size=100, seed=7, shuffle_buffer=20, resume=position)
        fail("resume with another batch size was accepted")
    except RuntimeError as e:
        check("another input plan" in str(e), "resume plan error: %s" % e)
        print("resume with another batch size: RuntimeError")
    print("OK")


def check_deterministic(folder, transport):
    spec = write_text(folder)
    total = sum(TEXT_RECORDS)
    opts = dict(seed=5, shuffle_buffer=30, deterministic=True)
    with session(spec, transport, 1, **opts) as s:
        want = [consume(s), consume(s)]
    with session(spec, transport, 3, threads=2, **opts) as s:
        got = [consume(s), consume(s)]
        held = s.metrics()["held_batches"]
    print("deterministic: %d and %d samples; 3 workers x 2 threads give the 1-worker order: %s" %
          (len(got[0]), len(got[1]), got == want))
    check(len(want[0]) == total and got == want, "3 workers gave another order than 1")
    check(want[0] != want[1], "the shuffle buffer gave the same order in two epochs")
    check(held == 0, "held_batches %d after the epochs" % held)
    with session(spec, transport, 2, **dict(opts, seed=6)) as s:
        other = consume(s)
    print("deterministic with seed 6: the same samples in another order: %s" %
          (sorted(other) == sorted(want[0]) and other != want[0]))
    check(sorted(other) == sorted(want[0]) and other != want[0], "seed 6 gave seed 5's order or other samples")
    with session(spec, transport, 2, **opts) as s:
        first = consume(s, 5)
        position = s.state()
    with session(spec, transport, 3, resume=position, **opts) as s:
        rest = consume(s)
    print("deterministic resume: first %d + rest %d continue the order: %s" %
          (len(first), len(rest), first + rest == want[0]))
    check(first + rest == want[0], "the resumed run did not continue the order")
    print("OK")


def check_errors(folder):
    missing = os.path.join(folder, "no_such_file.txt")
    try:
        goldminer.Session("text:" + missing)
        fail("a missing input file was accepted")
    except RuntimeError as e:
        print("missing file: RuntimeError: %s" % e)
        check(missing in str(e), "the error does not name the file")
    spec = write_criteo(folder, corrupt_at=(1, 250))
    bad = spec.split(",")[1]
    try:
        with session(spec, "ucx", 2) as s:
            for _ in range(3):
                for _ in s:
                    pass
        fail("a corrupt record went unnoticed")
    except RuntimeError as e:
        print("corrupt record: RuntimeError: %s" % e)
        check(bad in str(e), "the error does not name the file %s" % bad)
        check("record 250" in str(e), "the error does not name the record")
    spec = write_text(folder)
    saved = os.environ.get("GOLDMINER_DW_PROGRAM")
    broken = os.path.join(folder, "broken-dw")
    with open(broken, "w") as out:
        out.write("#!/bin/sh\nexit 3\n")  # a worker that cannot start
    os.chmod(broken, 0o755)
    os.environ["GOLDMINER_DW_PROGRAM"] = broken
    try:
        with goldminer.Session(spec, workers=2) as s:
            next(iter(s))
        fail("workers that all exited went unnoticed")
    except RuntimeError as e:
        print("workers exited: RuntimeError: %s" % e)
        check("exit status 3" in str(e), "the error does not give the exit status")
    os.environ["GOLDMINER_DW_PROGRAM"] = os.path.join(folder, "no-such-goldminer-dw")
    try:
        goldminer.Session(spec, workers=1)
        fail("a missing goldminer-dw was accepted")
    except RuntimeError as e:
        print("missing goldminer-dw: RuntimeError: %s" % e)
    if saved is None:
        del os.environ["GOLDMINER_DW_PROGRAM"]
    else:
        os.environ["GOLDMINER_DW_PROGRAM"] = saved
    with goldminer.Session(spec) as s:  # nobody delivers; Ctrl-C ends the wait
        timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
        start = time.monotonic()
        timer.start()
        try:
            next(iter(s))
            fail("a batch came from nowhere")
        except KeyboardInterrupt:
            waited = time.monotonic() - start
            print("Ctrl-C while waiting: KeyboardInterrupt")
            check(waited < 5, "KeyboardInterrupt came after %.1f s" % waited)
        timer.join()
        check(s.metrics()["epoch"] == 0, "the session goes on after Ctrl-C")
    with goldminer.Session(spec, timeout=0.5) as s:  # nobody delivers
        start = time.monotonic()
        try:
            next(iter(s))
            fail("a batch came from nowhere")
        except RuntimeError as e:
            print("timeout: RuntimeError: %s" % e)
            check(time.monotonic() - start < 10, "the timeout was not kept")
    for kwargs, error in [({"transport": "tcp"}, ValueError), ({"program": 3}, TypeError),
                          ({"timeout": -1}, ValueError),
                          ({"batch_size": 0}, ValueError), ({"resume": {"epoch": 0}}, ValueError),
                          ({"program": os.path.join(folder, "none.pt")}, OSError),
                          ({"program": b"not a zip"}, None)]:
        try:
            s = goldminer.Session(spec, **kwargs)
            if error is None:  # a program workers cannot load fails the epoch
                for transport in ["local", "ucx"]:
                    s2 = goldminer.Session(spec, program=kwargs["program"], workers=1, transport=transport)
                    try:
                        next(iter(s2))
                        fail("a broken program was accepted")
                    except RuntimeError as e:
                        print("program %r (%s): RuntimeError: %s" % (kwargs["program"], transport, e))
                        # Loaded by goldminer-dw's libtorch or (local threads, another
                        # torch) by this torch in a worker's Python child: the cause either way.
                        check("zip archive" in str(e), "the error does not give the cause")
                    s2.close()
                s.close()
                continue
            fail("%s accepted" % kwargs)
        except error as e:
            print("%s: %s" % (sorted(kwargs)[0], type(e).__name__))
    print("OK")


def check_metrics(folder):
    spec = write_text(folder)
    with session(spec, "ucx", 2, seed=1) as s:
        pids = s.worker_pids
        check(len(pids) == 2, "worker_pids %s" % pids)
        count = EpochCount("text")
        it = iter(s)
        for _ in range(3):
            count.add(check_batch("text", next(it), s.last_sample_ids))
        print("wait_for_workers(2) -> %d" % s.wait_for_workers(2, timeout=30))
        try:
            s.wait_for_workers(3, timeout=0.2)
            fail("wait_for_workers(3) returned with 2 workers")
        except RuntimeError as e:
            print("wait_for_workers(3): RuntimeError: %s" % e)
        # One default batch size: the C++ options', the extension's and the Python class's.
        default = inspect.signature(goldminer.Session.__init__).parameters["batch_size"].default
        check(default == goldminer._session.DEFAULT_BATCH_SIZE == 256, "Session's default batch_size %r" % default)
        m = s.metrics()
        keys = ["arrival_rate", "bad_records", "consumption_rate", "duplicates_dropped", "epoch", "held_batches",
                "per_worker", "queue_batches", "queue_bytes", "queue_fill", "scaling_window_batches",
                "scaling_window_s", "splits_failed", "trainer_wait_fraction", "workers", "workers_lost",
                "workers_rejected"]
        check(sorted(m) == keys, "metrics() keys %s" % sorted(m))
        print("metrics keys: " + " ".join(sorted(m)))
        print("workers %d" % m["workers"])
        check(m["workers"] == 2 and len(m["per_worker"]) == 2, "metrics %s" % m)
        check(sorted(m["per_worker"][0]) == ["asked_for_splits", "batches", "batches_per_s", "bytes", "draining", "id"],
              "per_worker %s" % m)
        check(sum(w["batches"] for w in m["per_worker"]) >= 3, "per_worker batches %s" % m["per_worker"])
        # A worker that sent batches had asked for splits first.
        check(all(w["asked_for_splits"] for w in m["per_worker"] if w["batches"] > 0),
              "per_worker asked_for_splits %s" % m["per_worker"])
        check(0 <= m["queue_fill"] <= 1 and m["epoch"] == 0, "metrics %s" % m)
        check(s.address.startswith("ucx://127.0.0.1:"), "address %s" % s.address)
        asked = s.drain_workers(1)
        print("drain_workers(1) -> %d" % asked)
        check(asked == 1, "drain_workers asked %d" % asked)
        # Until it left, the worker asked shows as draining (the other not).
        deadline = time.time() + 10
        m = s.metrics()
        while m["workers"] == 2 and not any(w["draining"] for w in m["per_worker"]) and time.time() < deadline:
            time.sleep(0.01)
            m = s.metrics()
        check(m["workers"] < 2 or [w["draining"] for w in m["per_worker"]].count(True) == 1,
              "one worker draining or gone after drain_workers(1): %s" % m["per_worker"])
        for batch in it:
            count.add(check_batch("text", batch, s.last_sample_ids))
        print("after drain: " + count.line(0))
        check(count.exact(), "the epoch with a drained worker")
        deadline = time.time() + 30
        while s.metrics()["workers"] > 1 and time.time() < deadline:
            time.sleep(0.1)
        print("workers after drain %d" % s.metrics()["workers"])
    for pid in pids:
        try:
            os.kill(pid, 0)
            fail("worker %d still runs after the session closed" % pid)
        except ProcessLookupError:
            pass
    print("workers stopped on close: yes")
    try:
        s.metrics()
        fail("metrics() on a closed session")
    except RuntimeError:
        print("closed session: RuntimeError")
    print("OK")


def check_environment(folder):
    spec = write_text(folder)
    total = sum(TEXT_RECORDS)
    os.environ["GOLDMINER_LISTEN"] = "local://env-%d" % os.getpid()
    os.environ["GOLDMINER_LOCAL_WORKERS"] = "2"
    os.environ["GOLDMINER_SECRET"] = "secret-from-the-environment"
    with goldminer.Session(spec, BATCH) as s:
        check(s.address == os.environ["GOLDMINER_LISTEN"], "address %s" % s.address)
        ids = consume(s)
        print("environment local workers: address %s, %d samples, %d unique" % (s.address, len(ids), len(set(ids))))
        check(len(ids) == total == len(set(ids)), "epoch with GOLDMINER_LOCAL_WORKERS")
    with goldminer.Session(spec, BATCH, listen="local://explicit-%d" % os.getpid()) as s:
        check(s.address == "local://explicit-%d" % os.getpid(), "explicit listen ignored: %s" % s.address)
        print("explicit listen overrides: yes")
    for name in ["GOLDMINER_LISTEN", "GOLDMINER_LOCAL_WORKERS", "GOLDMINER_SECRET"]:
        del os.environ[name]

    # External workers: one with the wrong secret is rejected, one with the
    # right one delivers the epoch.
    dw = os.environ.get("GOLDMINER_DW_PROGRAM", "goldminer-dw")
    with goldminer.Session(spec, BATCH, secret="the-job-secret") as s:
        env = dict(os.environ, GOLDMINER_TRAINER=s.address, GOLDMINER_SECRET="a-wrong-secret")
        wrong = subprocess.Popen([dw], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 30
        while s.metrics()["workers_rejected"] == 0 and time.time() < deadline:
            time.sleep(0.1)
        print("wrong secret rejected: %d" % s.metrics()["workers_rejected"])
        check(s.metrics()["workers_rejected"] == 1, "a worker with the wrong secret was not rejected")
        env["GOLDMINER_SECRET"] = "the-job-secret"
        right = subprocess.Popen([dw], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        ids = consume(s)
        print("external worker with the secret: %d samples, %d unique" % (len(ids), len(set(ids))))
        check(len(ids) == total == len(set(ids)), "epoch from the external worker")
    for p in (wrong, right):
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
        p.wait(timeout=30)
    print("OK")


def main(argv):
    if len(argv) < 2:
        fail(__doc__)
    # The distributed checks are a module of their own, beside this script; it
    # imports this one's helpers, so it is imported once these are defined.
    from session_check_ranks import check_ddp, check_ranks
    checks = {"epochs": check_epochs, "zerocopy": check_zerocopy, "program": check_program,
              "resume": check_resume, "deterministic": check_deterministic, "errors": check_errors,
              "metrics": check_metrics,
              "environment": check_environment, "ranks": check_ranks, "ddp": check_ddp}
    if argv[1] not in checks:
        fail("unknown check %r\n%s" % (argv[1], __doc__))
    with tempfile.TemporaryDirectory(prefix="goldminer-session-py.") as folder:
        checks[argv[1]](folder, *argv[2:])


if __name__ == "__main__":
    main(sys.argv)
