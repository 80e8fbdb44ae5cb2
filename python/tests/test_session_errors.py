"""goldminer.Session's errors name the file and the cause: a missing or
corrupt input, workers that exit or cannot start, a wait that Ctrl-C or
the timeout ends, arguments it refuses and a worker program workers cannot
load."""
import os
import signal
import threading
import time

import pytest

import goldminer
from session_inputs import TRANSPORTS, session, write_criteo, write_text


def test_a_missing_input_file_is_named(tmp_path):
    missing = os.path.join(tmp_path, "no_such_file.txt")
    with pytest.raises(RuntimeError) as e:
        goldminer.Session("text:" + missing)
    assert missing in str(e.value)


def test_a_corrupt_record_names_its_file_and_record(tmp_path):
    spec = write_criteo(tmp_path, corrupt_at=(1, 250))
    bad = spec.split(",")[1]
    with pytest.raises(RuntimeError) as e:
        with session(spec, "ucx", 2) as s:
            for _ in range(3):
                for _ in s:
                    pass
    assert bad in str(e.value)
    assert "record 250" in str(e.value)


def test_workers_that_all_exited_give_their_exit_status(tmp_path, monkeypatch):
    spec = write_text(tmp_path)
    broken = os.path.join(tmp_path, "broken-dw")
    with open(broken, "w") as out:
        out.write("#!/bin/sh\nexit 3\n")  # a worker that cannot start
    os.chmod(broken, 0o755)
    monkeypatch.setenv("GOLDMINER_DW_PROGRAM", broken)
    with pytest.raises(RuntimeError, match="exit status 3"):
        with goldminer.Session(spec, workers=2) as s:
            next(iter(s))


def test_a_missing_goldminer_dw_is_refused(tmp_path, monkeypatch):
    spec = write_text(tmp_path)
    monkeypatch.setenv("GOLDMINER_DW_PROGRAM", os.path.join(tmp_path, "no-such-goldminer-dw"))
    with pytest.raises(RuntimeError, match="no-such-goldminer-dw"):
        goldminer.Session(spec, workers=1)


def test_ctrl_c_ends_the_wait_for_a_batch(tmp_path):
    # Ctrl-C as a trainer started from a terminal gets it: Python's own
    # handler. (A shell's background job, as the test command's torch 2.x
    # stage is, starts with SIGINT ignored, and Python then installs none.)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    with goldminer.Session(write_text(tmp_path)) as s:  # nobody delivers
        timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
        start = time.monotonic()
        timer.start()
        try:
            with pytest.raises(KeyboardInterrupt):
                next(iter(s))
        finally:
            timer.join()
            signal.signal(signal.SIGINT, previous)
        assert time.monotonic() - start < 5, "KeyboardInterrupt came late"
        assert s.metrics()["epoch"] == 0, "the session goes on after Ctrl-C"


def test_the_timeout_ends_the_wait_for_a_batch(tmp_path):
    with goldminer.Session(write_text(tmp_path), timeout=0.5) as s:  # nobody delivers
        start = time.monotonic()
        with pytest.raises(RuntimeError) as e:
            next(iter(s))
        assert time.monotonic() - start < 10, "the timeout was not kept"
    assert str(e.value).startswith("goldminer.Session: no batch within 0.5 s (0 workers connected, 0 lost")


@pytest.mark.parametrize("kwargs, error", [
    ({"transport": "tcp"}, ValueError),
    ({"program": 3}, TypeError),
    ({"timeout": -1}, ValueError),
    ({"batch_size": 0}, ValueError),
    ({"resume": {"epoch": 0}}, ValueError),
    ({"program": "none.pt"}, FileNotFoundError),
], ids=["transport", "program_type", "timeout", "batch_size", "resume", "program_path"])
def test_bad_arguments_are_refused(tmp_path, kwargs, error):
    if kwargs.get("program") == "none.pt":
        kwargs = {"program": os.path.join(tmp_path, "none.pt")}
    with pytest.raises(error):
        goldminer.Session(write_text(tmp_path), **kwargs)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_program_workers_cannot_load_fails_the_epoch(tmp_path, transport):
    spec = write_text(tmp_path)
    goldminer.Session(spec, program=b"not a zip").close()  # taken: only the workers load it
    with goldminer.Session(spec, program=b"not a zip", workers=1, transport=transport) as s:
        # Loaded by goldminer-dw's libtorch or (local threads, another torch)
        # by this torch in a worker's Python child: the cause either way.
        with pytest.raises(RuntimeError, match="zip archive"):
            next(iter(s))
