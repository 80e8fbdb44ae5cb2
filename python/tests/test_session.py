"""goldminer.Session (the goldminer._session extension) end to end on both
transports: every sample exactly once per epoch with its values, batches as
views of the received buffer, worker programs, resuming from state() and
the deterministic order. Each test writes its own input files (text lines,
Criteo-like TSV: session_inputs.py) into its temporary folder."""
import io
import json
import os

import pytest
import torch

import goldminer
from session_inputs import (CRITEO_RECORDS, TEXT_RECORDS, TRANSPORTS, EpochCount, check_batch, consume,
                            criteo_expected, records, session, write_criteo, write_input, write_text)


def run_epochs(folder, fmt, transport, workers, epochs):
    """`epochs` epochs of `workers` workers over the `fmt` input, each
    batch checked against its records; returns the dtypes of the last
    batch."""
    spec = write_input(fmt, folder)
    total = sum(records(fmt))
    with session(spec, transport, workers, seed=3, shuffle_buffer=50) as s:
        assert s.total_records == total
        assert s.records_per_file == records(fmt)
        for e in range(epochs):
            count = EpochCount(fmt)
            for batch in s:
                count.add(check_batch(fmt, batch, s.last_sample_ids))
            assert count.summary() == (total, total, 0, 0), "epoch %d: samples, unique, duplicates, missing" % e
            assert s.state()["epoch"] == e + 1
        return [t.dtype for t in batch]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_text_two_workers_every_line_once_per_epoch(tmp_path, transport):
    assert run_epochs(tmp_path, "text", transport, 2, 2) == [torch.uint8, torch.int64]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_criteo_two_workers_tensors_and_values(tmp_path, transport):
    assert run_epochs(tmp_path, "criteo", transport, 2, 2) == [torch.float32, torch.float32, torch.int64]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_batches_are_views_of_the_received_buffer(tmp_path, transport):
    """Each tensor of a batch (and its sample ids) is a view of the received
    buffer: they lie back to back in it, each 64-byte aligned, as the wire
    laid them out (copies would be allocations of their own), and looking
    at the sample ids twice gives the same memory. A batch held on stays
    intact through later epochs and the session's close."""
    s = session(write_text(tmp_path), transport, 2)
    held = None
    batches = 0
    for epoch in range(2):
        for batch in s:
            batches += 1
            ids = s.last_sample_ids
            views = sorted((t for t in list(batch) + [ids] if t.numel() > 0), key=lambda t: t.data_ptr())
            end = None
            for t in views:
                assert t.data_ptr() % 64 == 0, "tensor at %#x not 64-byte aligned" % t.data_ptr()
                assert end is None or t.data_ptr() == (end + 63) // 64 * 64, \
                    "tensor at %#x not next to the one before it (ends at %#x)" % (t.data_ptr(), end)
                end = t.data_ptr() + t.numel() * t.element_size()
                assert t.is_contiguous() and not t.requires_grad and t.device.type == "cpu"
            assert s.last_sample_ids.data_ptr() == ids.data_ptr(), "sample ids copied on a second look"
            if held is None:
                held = (batch, ids, [t.clone() for t in batch], ids.clone())
    assert batches == 2 * len(s) == 62  # 31 batches an epoch: splits of 100 in batches of 64
    batch, ids, copies, id_copy = held
    assert all(torch.equal(a, b) for a, b in zip(batch, copies)) and torch.equal(ids, id_copy), \
        "a held batch changed while the session went on"
    s.close()
    assert all(torch.equal(a, b) for a, b in zip(batch, copies)) and torch.equal(ids, id_copy), \
        "a held batch changed when the session closed"
    batch[1][0] = 12345  # writable views of this batch only
    assert int(batch[1][0]) == 12345


class WorkerProgram(torch.nn.Module):
    def forward(self, label, dense, sparse):
        d = torch.nan_to_num(dense, nan=0.0)
        d = torch.log1p(d) - d.mean(0, keepdim=True)  # depends on the whole batch
        return label.unsqueeze(1), d, torch.remainder(sparse, 1000), torch.tensor([label.shape[0]])


def run_program(folder, transport, kind):
    """One epoch with a worker program given as `kind` (a ScriptModule, a
    file's path, its bytes): each output equals the program run here on
    the records the batch's sample ids name."""
    spec = write_criteo(folder)
    module = torch.jit.script(WorkerProgram())
    program = module
    if kind != "module":
        buffer = io.BytesIO()
        torch.jit.save(module, buffer)
        program = buffer.getvalue()
        if kind == "path":
            program = os.path.join(folder, "worker.pt")
            with open(program, "wb") as out:
                out.write(buffer.getvalue())
    rows = {(f, r): criteo_expected(f, r) for f, n in enumerate(CRITEO_RECORDS) for r in range(n)}
    count = EpochCount("criteo")
    with session(spec, transport, 2, program=program, seed=5, shuffle_buffer=30) as s:
        for out in s:
            ids = [(int(f), int(r)) for f, r in s.last_sample_ids.tolist()]
            count.add(ids)
            want = module(*[torch.stack([rows[i][k] for i in ids]) for k in range(3)])
            assert len(out) == len(want)
            for got, exp in zip(out, want):
                assert got.dtype == exp.dtype and got.shape == exp.shape
                if got.dtype.is_floating_point:
                    assert torch.allclose(got, exp, rtol=1e-6, atol=1e-6), "output differs from the program here"
                else:
                    assert torch.equal(got, exp), "output differs from the program here"
    total = sum(CRITEO_RECORDS)
    assert count.summary() == (total, total, 0, 0)
    assert [t.dtype for t in out] == [torch.float32, torch.float32, torch.int64, torch.int64]


def test_script_module_program_runs_on_ucx_workers(tmp_path):
    run_program(tmp_path, "ucx", "module")


def test_program_file_runs_on_local_workers(tmp_path):
    run_program(tmp_path, "local", "path")


def test_program_bytes_run_on_ucx_workers(tmp_path):
    run_program(tmp_path, "ucx", "bytes")


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_resume_gives_exactly_the_rest(tmp_path, transport):
    spec = write_text(tmp_path)
    total = sum(TEXT_RECORDS)
    with session(spec, transport, 2, seed=7, shuffle_buffer=20) as s:
        first = consume(s, 7)
        position = json.loads(json.dumps(s.state()))  # plain data
    assert sorted(position) == ["bad_records", "done", "epoch", "partial", "plan", "seed"]
    assert position["seed"] == 7 and position["epoch"] == 0
    assert (len(position["done"]), len(position["partial"])) == (3, 1)  # 7 batches: 3 splits and part of one
    with session(spec, transport, 2, shuffle_buffer=20, resume=position) as s:
        rest = consume(s)
        assert s.state()["epoch"] == 1
        following = consume(s)
    assert len(first) + len(rest) == total
    assert set(first) | set(rest) == {(f, r) for f, n in enumerate(TEXT_RECORDS) for r in range(n)}
    assert len(following) == total and len(set(following)) == total, "the epoch after the resumed one"
    with pytest.raises(RuntimeError, match="seed"):
        session(spec, transport, 0, seed=8, resume=position)
    with pytest.raises(RuntimeError, match="another input plan"):
        goldminer.Session(spec, batch_size=100, seed=7, shuffle_buffer=20, resume=position)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_deterministic_order_whatever_the_workers(tmp_path, transport):
    spec = write_text(tmp_path)
    total = sum(TEXT_RECORDS)
    opts = dict(seed=5, shuffle_buffer=30, deterministic=True)
    with session(spec, transport, 1, **opts) as s:
        want = [consume(s), consume(s)]
    with session(spec, transport, 3, threads=2, **opts) as s:
        got = [consume(s), consume(s)]
        held = s.metrics()["held_batches"]
    assert len(want[0]) == total and len(want[1]) == total
    assert got == want, "3 workers x 2 threads gave another order than 1 worker"
    assert want[0] != want[1], "the shuffle buffer gave the same order in two epochs"
    assert held == 0
    with session(spec, transport, 2, **dict(opts, seed=6)) as s:
        other = consume(s)
    assert sorted(other) == sorted(want[0]) and other != want[0], "seed 6 gave seed 5's order or other samples"
    with session(spec, transport, 2, **opts) as s:
        first = consume(s, 5)
        position = s.state()
    with session(spec, transport, 3, resume=position, **opts) as s:
        rest = consume(s)
    assert (len(first), len(rest)) == (264, 1273)  # 5 batches of 64 from splits of 100: 64 + 36 + 64 + 36 + 64
    assert first + rest == want[0], "the resumed run did not continue the order"
