"""The environment of the goldminer package's tests: the package and the
goldminer-dw of one build.

    GOLDMINER_BUILD_DIR=/path/to/build python3 -m pytest -rs python/tests

GOLDMINER_BUILD_DIR (required) names a built build directory: its
goldminer-dw runs the data workers (GOLDMINER_DW_PROGRAM) and, unless
PYTHONPATH is set, its staged package (BUILD/python) is the one tested.
With PYTHONPATH set (a `pip install --target` folder, as the torch 2.x
stage of scripts/run-tests does) the package comes from there. UCX stays on
loopback, and neither the GOLDMINER_* variables of an enclosing goldminer-run
or --goldminer job nor the rank of an enclosing launcher reach the tests.

Each test runs under a watchdog: past TEST_TIMEOUT_S it fails; one that
does not get back to Python within GRACE_S more ends the run with the
traceback of every thread (a hang is a failure, never a stuck run). The
tests that use goldminer.split (split_loaded) find it loaded, compiled for
this torch first where it has to be, before their watchdog starts."""
import faulthandler
import importlib
import os
import signal
import sys

import pytest

# The helpers' asserts explain themselves as the tests' own do.
pytest.register_assert_rewrite("session_inputs", "dataloader_datasets")

TEST_TIMEOUT_S = 300
GRACE_S = 60
# What an enclosing job or launcher would leave that changes a Session.
UNSET = ["GOLDMINER_LISTEN", "GOLDMINER_SECRET", "GOLDMINER_SECRET_FILE", "GOLDMINER_LOCAL_WORKERS",
         "RANK", "WORLD_SIZE", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS"]


def _build_dir():
    build = os.environ.get("GOLDMINER_BUILD_DIR")
    if not build:
        raise pytest.UsageError("python/tests: GOLDMINER_BUILD_DIR is not set: set it to a built build directory "
                                "(the one with goldminer-dw and the staged package python/goldminer)")
    if not os.path.isdir(build):
        raise pytest.UsageError("python/tests: GOLDMINER_BUILD_DIR=%s: not a directory" % build)
    return os.path.abspath(build)


def pytest_configure(config):
    build = _build_dir()
    staged = os.path.join(build, "python")
    if not os.environ.get("PYTHONPATH"):
        if not os.path.isdir(os.path.join(staged, "goldminer")):
            raise pytest.UsageError("python/tests: %s/goldminer missing: run make in GOLDMINER_BUILD_DIR=%s"
                                    % (staged, build))
        sys.path.insert(0, staged)
        os.environ["PYTHONPATH"] = staged  # for the interpreters the tests start
    os.environ["GOLDMINER_DW_PROGRAM"] = os.path.join(build, "goldminer-dw")
    os.environ["UCX_NET_DEVICES"] = "lo"
    for name in UNSET:
        os.environ.pop(name, None)
    try:  # the package as the tests will import it
        importlib.import_module("goldminer._session")
    except ImportError as e:
        raise pytest.UsageError("python/tests: cannot import goldminer._session from PYTHONPATH=%s: %s"
                                % (os.environ["PYTHONPATH"], e))


def pytest_report_header(config):
    import torch

    import goldminer
    return ["goldminer: %s" % os.path.dirname(goldminer.__file__),
            "torch %s: %s" % (torch.__version__, os.path.dirname(torch.__file__)),
            "goldminer-dw: %s" % os.environ["GOLDMINER_DW_PROGRAM"]]


class TimedOut(Exception):
    """Raised in a test that ran past TEST_TIMEOUT_S."""


def _timed_out(signum, frame):
    raise TimedOut("the test ran past %d s" % TEST_TIMEOUT_S)


@pytest.fixture(autouse=True)
def watchdog():
    previous = signal.signal(signal.SIGALRM, _timed_out)
    signal.alarm(TEST_TIMEOUT_S)
    faulthandler.dump_traceback_later(TEST_TIMEOUT_S + GRACE_S, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


SPLIT_TIMEOUT_S = 1200


def _split_timed_out(signum, frame):
    raise TimedOut("loading goldminer.split ran past %d s" % SPLIT_TIMEOUT_S)


@pytest.fixture(scope="session")
def split_loaded():
    """goldminer.split loaded once, before the tests that use it arm their
    watchdogs: under a torch it has no prebuilt split for, its first use
    compiles it into the cache (minutes on a loaded machine), which is no
    part of what those tests check. Bounded by SPLIT_TIMEOUT_S."""
    from goldminer import _split_build
    previous = signal.signal(signal.SIGALRM, _split_timed_out)
    signal.alarm(SPLIT_TIMEOUT_S)
    try:
        return _split_build.load()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def dw_program():
    """The goldminer-dw the Sessions start (GOLDMINER_DW_PROGRAM)."""
    return os.environ["GOLDMINER_DW_PROGRAM"]


@pytest.fixture(scope="session")
def source_tree():
    """The top of the source tree these tests are in (examples/ is there)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
