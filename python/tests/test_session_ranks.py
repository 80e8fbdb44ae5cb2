"""goldminer.Session under data parallelism: rank=/world_size= (and
RANK/WORLD_SIZE) give every sample to one rank and the same len() and
batches to each; examples/train_dlrm_ddp.py trains two ranks under DDP
(gloo) in step on every sample once."""
import json
import math
import os
import socket
import subprocess
import sys

import pytest

from session_inputs import CRITEO_RECORDS, TEXT_RECORDS, TRANSPORTS, session, write_criteo, write_text


def lockstep_epoch(sessions):
    """One epoch of each session taken as DDP steps ranks: one batch from
    each in turn. Returns ([batches of each], [sample ids of each])."""
    iters = [iter(s) for s in sessions]
    ids = [[] for _ in sessions]
    batches = [0 for _ in sessions]
    done = [False for _ in sessions]
    while not all(done):
        for r, s in enumerate(sessions):
            if done[r]:
                continue
            try:
                next(iters[r])
            except StopIteration:
                done[r] = True
                continue
            batches[r] += 1
            ids[r].extend((int(f), int(i)) for f, i in s.last_sample_ids.tolist())
    return batches, ids


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_ranks_read_every_sample_once_with_equal_lengths(tmp_path, transport, monkeypatch):
    spec = write_text(tmp_path)
    total = sum(TEXT_RECORDS)
    sessions = [session(spec, transport, 2, seed=4, shuffle_buffer=30, rank=r, world_size=2) for r in (0, 1)]
    try:
        assert [s.rank for s in sessions] == [0, 1] and sessions[1].world_size == 2
        for epoch in range(2):
            lens = [len(s) for s in sessions]
            batches, ids = lockstep_epoch(sessions)
            assert batches[0] == batches[1] == lens[0] == lens[1], "epoch %d: batches %s, len %s" % (
                epoch, batches, lens)
            both = ids[0] + ids[1]
            assert len(both) == total and len(set(both)) == total, "epoch %d: not every sample on one rank" % epoch
            if epoch == 0:
                assert sum(s.records_per_epoch for s in sessions) == total
    finally:
        for s in sessions:
            s.close()
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "3")
    with session(spec, transport, 0) as s:
        assert (s.rank, s.world_size) == (1, 3), "RANK/WORLD_SIZE not read"
    with pytest.raises(ValueError) as e:
        session(spec, transport, 0, rank=3)
    assert str(e.value) == "goldminer.Session: rank 3 is not a rank of world_size 3"


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_ddp_example_trains_two_ranks_in_step_on_every_sample_once(tmp_path, source_tree, split_loaded):
    # The example splits its model: split_loaded compiled the split for this
    # torch (where there is no prebuilt one) into the cache the example reads.
    spec = write_criteo(tmp_path)
    total = sum(CRITEO_RECORDS)
    example = os.path.join(source_tree, "examples", "train_dlrm_ddp.py")
    run = subprocess.run([sys.executable, example, "--input", spec, "--nprocs", "2", "--workers", "1",
                          "--batch-size", "50", "--epochs", "2", "--master-port", str(free_port())],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=240)
    assert run.returncode == 0, "train_dlrm_ddp.py exited %d: %s" % (run.returncode, run.stderr[-3000:])
    lines = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    for epoch in range(2):
        ranks = sorted((line for line in lines if line["epoch"] == epoch), key=lambda line: line["rank"])
        assert [line["rank"] for line in ranks] == [0, 1], "epoch %d: %s" % (epoch, ranks)
        assert ranks[0]["batches"] == ranks[1]["batches"], "the ranks took different numbers of batches"
        assert ranks[0]["samples"] + ranks[1]["samples"] == total
        assert ranks[0]["id_sum"] + ranks[1]["id_sum"] == total * (total - 1) // 2
        # In step: the same parameters up to rounding. DDP on CPU (gloo) is
        # not bitwise deterministic (pytorch/pytorch#36871); a step one rank
        # missed moves the sum by far more than a millionth.
        d0, d1 = ranks[0]["params_digest"], ranks[1]["params_digest"]
        assert math.isclose(d0, d1, rel_tol=1e-6, abs_tol=1e-9), "parameters not in step: %r and %r" % (d0, d1)
