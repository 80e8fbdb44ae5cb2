"""`python -m goldminer._dw_child` without goldminer-dw: a child whose
shared memory does not come over its stdin (goldminer._dw_pipe's memory
message) says what it expected. That a child started by goldminer-dw needs
no descriptor above 2 is dw_daemon/python_program_test.cc's."""
import os
import socket
import struct
import subprocess
import sys

import pytest

EXPECTED = ("goldminer._dw_child: expected %s (the shared memory of the replies%s) with SCM_RIGHTS as the first "
            "message on stdin, a Unix socket from goldminer-dw")


def test_a_child_started_by_hand_says_what_it_expected():
    r = subprocess.run([sys.executable, "-m", "goldminer._dw_child"], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert r.stdout == ""
    assert r.stderr.startswith(EXPECTED % ("1 memfd", "") + "; stdin is not a socket ("), r.stderr
    assert r.stderr.endswith("): this module is run by goldminer-dw, not by hand\n"), r.stderr


# (the child's arguments, the count sent, how many memfds go with it, what it says it received)
WRONG_MEMORY = [
    ([], 1, 0, "0 descriptors and a count of 1"),
    (["--torchscript"], 2, 0, "0 descriptors and a count of 2"),
    (["--torchscript"], 1, 1, "1 descriptor and a count of 1"),
    ([], 2, 2, "2 descriptors and a count of 2"),
    ([], 3, 3, "2 descriptors (more were cut off) and a count of 3"),
]


@pytest.mark.parametrize("args,count,fds,received", WRONG_MEMORY)
def test_a_child_sent_other_descriptors_replies_what_it_expected(args, count, fds, received):
    ours, theirs = socket.socketpair()
    memfds = [os.memfd_create("goldminer-test-%d" % i) for i in range(fds)]
    try:
        child = subprocess.Popen([sys.executable, "-m", "goldminer._dw_child"] + args, stdin=theirs,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        theirs.close()
        socket.send_fds(ours, [struct.pack("<I", count)], memfds)
        out, err = child.communicate(timeout=120)
    finally:
        ours.close()
        for f in memfds:
            os.close(f)
    torchscript = args == ["--torchscript"]
    message = (EXPECTED % ("2 memfds" if torchscript else "1 memfd", " and of the inputs" if torchscript else "")
               + "; received " + received)
    assert child.returncode == 1, err
    assert out == b"\x01" + struct.pack("<Q", len(message)) + message.encode(), err


def test_a_child_whose_worker_closes_its_stdin_at_once_ends_quietly():
    ours, theirs = socket.socketpair()
    child = subprocess.Popen([sys.executable, "-m", "goldminer._dw_child"], stdin=theirs,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    theirs.close()
    ours.close()
    out, err = child.communicate(timeout=120)
    assert (child.returncode, out, err) == (0, b"", b"")
