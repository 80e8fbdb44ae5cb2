"""goldminer.Session's workers: metrics(), wait_for_workers(),
drain_workers() and the workers' lifetime; the GOLDMINER_* variables of a
job, the job's secret and external goldminer-dw workers."""
import inspect
import os
import signal
import subprocess
import time

import pytest

import goldminer
from session_inputs import BATCH, TEXT_RECORDS, EpochCount, check_batch, consume, session, write_text

METRICS_KEYS = ["arrival_rate", "bad_records", "consumption_rate", "duplicates_dropped", "epoch", "held_batches",
                "per_worker", "queue_batches", "queue_bytes", "queue_fill", "scaling_window_batches",
                "scaling_window_s", "splits_failed", "trainer_wait_fraction", "workers", "workers_lost",
                "workers_rejected"]


def wait_until(condition, timeout_s, poll_s=0.1):
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(poll_s)


def test_metrics_drain_and_worker_lifetime(tmp_path):
    total = sum(TEXT_RECORDS)
    with session(write_text(tmp_path), "ucx", 2, seed=1) as s:
        pids = s.worker_pids
        assert len(pids) == 2
        count = EpochCount("text")
        it = iter(s)
        for _ in range(3):
            count.add(check_batch("text", next(it), s.last_sample_ids))
        assert s.wait_for_workers(2, timeout=30) == 2
        with pytest.raises(RuntimeError) as e:
            s.wait_for_workers(3, timeout=0.2)
        assert "goldminer.Session: only 2 of 3 workers joined within 0.2 s" in str(e.value)
        # One default batch size: the C++ options', the extension's and the Python class's.
        default = inspect.signature(goldminer.Session.__init__).parameters["batch_size"].default
        assert default == goldminer._session.DEFAULT_BATCH_SIZE == 256
        m = s.metrics()
        assert sorted(m) == METRICS_KEYS
        assert m["workers"] == 2 and len(m["per_worker"]) == 2
        assert sorted(m["per_worker"][0]) == ["asked_for_splits", "batches", "batches_per_s", "bytes", "draining",
                                              "id"]
        assert sum(w["batches"] for w in m["per_worker"]) >= 3
        # A worker that sent batches had asked for splits first.
        assert all(w["asked_for_splits"] for w in m["per_worker"] if w["batches"] > 0), m["per_worker"]
        assert 0 <= m["queue_fill"] <= 1 and m["epoch"] == 0
        assert s.address.startswith("ucx://127.0.0.1:")
        assert s.drain_workers(1) == 1
        # Until it left, the worker asked shows as draining (the other not).
        m = s.metrics()
        deadline = time.monotonic() + 10
        while m["workers"] == 2 and not any(w["draining"] for w in m["per_worker"]) and time.monotonic() < deadline:
            time.sleep(0.01)
            m = s.metrics()
        assert m["workers"] < 2 or [w["draining"] for w in m["per_worker"]].count(True) == 1, m["per_worker"]
        for batch in it:
            count.add(check_batch("text", batch, s.last_sample_ids))
        assert count.summary() == (total, total, 0, 0), "the epoch with a drained worker"
        wait_until(lambda: s.metrics()["workers"] <= 1, 30)
        assert s.metrics()["workers"] == 1
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # the session's close stopped its workers
    with pytest.raises(RuntimeError):
        s.metrics()  # of a closed session


def test_environment_secret_and_external_workers(tmp_path, monkeypatch, dw_program):
    spec = write_text(tmp_path)
    total = sum(TEXT_RECORDS)
    listen = "local://env-%d" % os.getpid()
    monkeypatch.setenv("GOLDMINER_LISTEN", listen)
    monkeypatch.setenv("GOLDMINER_LOCAL_WORKERS", "2")
    monkeypatch.setenv("GOLDMINER_SECRET", "secret-from-the-environment")
    with goldminer.Session(spec, BATCH) as s:
        assert s.address == listen
        ids = consume(s)
        assert len(ids) == len(set(ids)) == total, "an epoch with GOLDMINER_LOCAL_WORKERS"
    explicit = "local://explicit-%d" % os.getpid()
    with goldminer.Session(spec, BATCH, listen=explicit) as s:
        assert s.address == explicit, "listen= does not override GOLDMINER_LISTEN"
    for name in ["GOLDMINER_LISTEN", "GOLDMINER_LOCAL_WORKERS", "GOLDMINER_SECRET"]:
        monkeypatch.delenv(name)

    # External workers: one with the wrong secret is rejected, one with the
    # right one delivers the epoch.
    workers = []
    try:
        with goldminer.Session(spec, BATCH, secret="the-job-secret") as s:
            env = dict(os.environ, GOLDMINER_TRAINER=s.address, GOLDMINER_SECRET="a-wrong-secret")
            workers.append(subprocess.Popen([dw_program], env=env, stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL))
            wait_until(lambda: s.metrics()["workers_rejected"] > 0, 30)
            assert s.metrics()["workers_rejected"] == 1, "a worker with the wrong secret was not rejected"
            env["GOLDMINER_SECRET"] = "the-job-secret"
            workers.append(subprocess.Popen([dw_program], env=env, stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL))
            ids = consume(s)
            assert len(ids) == len(set(ids)) == total, "the epoch from the external worker"
    finally:
        for p in workers:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
            p.wait(timeout=30)
