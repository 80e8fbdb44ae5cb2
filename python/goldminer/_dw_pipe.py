"""The pipe between a data worker (goldminer-dw) and the Python process it
runs (goldminer._dw_child: a goldminer.DataLoader's dataset; with
--torchscript goldminer._dw_script: a TorchScript worker program): reading
requests, replying tensors or errors, the shared memory of the replies.

The process runs as `python -m goldminer._dw_child [--torchscript --threads=N
--saved-by=VERSION]` by dw_daemon/python_program.cc, with PYTHONPATH set to
the trainer's sys.path and GOLDMINER_PY_MAIN to the training script when the
dataset's pickle refers to it. It needs no descriptor but 0, 1 and 2, so that
it may run through a container runtime that closes the others (enroot start,
ch-run). Protocol (little-endian), requests on stdin (one end of a Unix
stream socket pair), replies on stdout (a pipe):

  memory:  once, first: u32 count, sent with SCM_RIGHTS carrying `count`
           memfds: the shared memory of the replies (which this process
           grows and the worker maps), then with --torchscript the memory of
           the inputs (which the worker grows and writes); 1 or 2. A process
           whose stdin is not a socket exits 2 saying so; one that receives
           other descriptors replies the error
  start:   u64 length, the pickle of the loader's settings (from the
           trainer, which the worker has authenticated first: gmcore/peer_auth.h),
           or with --torchscript the TorchScript module's zip
           -> reply with no tensors (ready) or an error
  batch:   u32 epoch, u64 seed, u32 n, u64 position[n]
           -> reply: the collated batch
  shard:   (settings "iterable": an IterableDataset) u32 epoch, u32 shard,
           u64 seed, u64 index -> reply: batch `index` of the shard, its first
           tensor int64 [2] = (first item, items), or u8 3 past the shard's end
  tensors: (--torchscript) u32 epoch, u64 seed, u32 count, then per tensor
           u8 dtype, u8 ndim, i64 shape[ndim], u64 nbytes, u64 offset: the
           reader's tensors, their bytes at that offset of the inputs' memfd
           (valid until the reply)
           -> reply: the program's output tensors (no structure tensor)
  reply:   u8 0, u32 count, then per tensor u8 dtype, u8 ndim, i64 shape[ndim],
           u64 nbytes, u64 offset: its bytes are at that offset of the
           replies' memfd, valid until the next request; for a dataset the
           first tensor (uint8) is the JSON of the batch's structure
           (goldminer._tree.to_wire; the trainer never unpickles what a
           worker sends)
           or u8 1, u64 length, the error (UTF-8), naming the dataset index
           and holding the traceback; u8 2 instead of 1 for an error of the
           machine rather than the data (MemoryError, an OSError of errno
           EIO, ENOMEM, ESTALE or ETIMEDOUT: of_environment), whose split the
           worker gives back for another worker to re-run
"""

import errno
import os
import signal
import socket
import struct
import sys


def read(stream, n):
    data = stream.read(n)
    if data is None or len(data) < n:
        raise EOFError
    return data


# OSErrors of the machine (its disk, memory, network file system), not of
# the data: another worker may read the same item.
ENVIRONMENT_ERRNOS = frozenset((errno.EIO, errno.ENOMEM, errno.ESTALE, errno.ETIMEDOUT))


def of_environment(e):
    """Whether exception `e` is the machine's fault rather than the data's."""
    return isinstance(e, MemoryError) or (isinstance(e, OSError) and e.errno in ENVIRONMENT_ERRNOS)


def reply_error(out, message, environment=False):
    data = message.encode("utf-8", "replace")
    out.write((b"\x02" if environment else b"\x01") + struct.pack("<Q", len(data)) + data)
    out.flush()


class SharedMemory:
    """The memfd the worker reads batches from (the first one it sent), grown here as needed."""

    def __init__(self, fd):
        self.fd, self.size, self.map, self.bytes = fd, 0, None, None

    def place(self, tensors):
        """Copies the tensors in (64-byte aligned); their offsets."""
        import mmap
        import torch
        offsets, end = [], 0
        for t in tensors:
            offsets.append(end)
            end += (t.numel() * t.element_size() + 63) // 64 * 64
        if end > self.size:
            size = max(end, 2 * self.size, 1 << 20)
            os.ftruncate(self.fd, size)
            if self.map is not None:
                self.bytes = None  # its view of the map goes first (an exported buffer cannot close)
                self.map.close()
            self.map = mmap.mmap(self.fd, size)
            self.bytes = torch.frombuffer(self.map, dtype=torch.uint8)  # the whole map, sliced per tensor
            self.size = size
        for t, off in zip(tensors, offsets):
            n = t.numel() * t.element_size()
            if n:
                flat = t.reshape(-1)
                self.bytes[off:off + n].copy_(flat.view(torch.uint8) if t.dtype != torch.bool else flat.to(torch.uint8))
        return offsets


def reply_tensors(out, tensors, shared):
    from goldminer._tree import WIRE_DTYPES
    tensors = [t.detach().contiguous() for t in tensors]
    offsets = shared.place(tensors)
    header = [b"\x00", struct.pack("<I", len(tensors))]
    for t, off in zip(tensors, offsets):
        header.append(struct.pack("<BB%dqQQ" % t.dim(), WIRE_DTYPES[t.dtype], t.dim(), *t.shape,
                                  t.numel() * t.element_size(), off))
    out.write(b"".join(header))
    out.flush()


class NoSharedMemory(RuntimeError):
    """The worker's memfds did not come: the message says what was expected
    and what came instead. `exit_status`: 2 where stdin is not a socket (run
    by hand, with nobody reading the replies), else 1."""

    def __init__(self, message, exit_status):
        super().__init__(message)
        self.exit_status = exit_status


def _expected(count):
    return ("goldminer._dw_child: expected %d memfd%s (the shared memory of the replies%s) with SCM_RIGHTS as the "
            "first message on stdin, a Unix socket from goldminer-dw" % (
                count, "" if count == 1 else "s", "" if count == 1 else " and of the inputs"))


def receive_memory(fd, count):
    """The `count` memfds the worker sends first on socket `fd` (the
    protocol's memory message), close-on-exec. Read before any buffered
    reader wraps `fd`: a reader would read on past the message, and the
    descriptors it carries would be dropped. Raises NoSharedMemory, or
    EOFError when the worker closed the socket before sending anything."""
    own = os.dup(fd)  # the socket object closes its own descriptor, not `fd`
    try:
        sock = socket.socket(fileno=own)
    except OSError as e:
        os.close(own)
        raise NoSharedMemory("%s; stdin is not a socket (%s): this module is run by goldminer-dw, not by hand"
                             % (_expected(count), e.strerror), 2) from None
    fds = []
    try:
        payload, fds, flags, _ = socket.recv_fds(sock, 4, 2, socket.MSG_CMSG_CLOEXEC)
        while payload and len(payload) < 4:  # the count's bytes beyond the first carry no descriptors
            more = sock.recv(4 - len(payload))
            if not more:
                break
            payload += more
    finally:
        sock.close()
    if not payload and not fds:
        raise EOFError
    sent = struct.unpack("<I", payload)[0] if len(payload) == 4 else None
    if len(fds) != count or sent != count or flags & socket.MSG_CTRUNC:
        for f in fds:
            os.close(f)
        raise NoSharedMemory("%s; received %d descriptor%s%s and a count of %s" % (
            _expected(count), len(fds), "" if len(fds) == 1 else "s",
            " (more were cut off)" if flags & socket.MSG_CTRUNC else "",
            sent if sent is not None else "%d bytes" % len(payload)), 1)
    return fds


def open_pipes(memory_count):
    """The request and reply streams and the `memory_count` memfds the
    worker sends first (receive_memory). Requests on fd 0, replies on fd 1;
    then stdin is /dev/null and stdout is stderr, so that a program that
    prints does not corrupt the replies. Ctrl-C in the trainer's terminal
    reaches this process group too: the worker decides (it drains), as
    torch's DataLoader workers leave it to the main process. NoSharedMemory
    is told once before it is raised: replied to the worker, or written to
    stderr where stdin is not a socket."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    request_fd = os.dup(0)
    replies = os.fdopen(os.dup(1), "wb", buffering=1 << 20)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        memory = receive_memory(request_fd, memory_count)
    except NoSharedMemory as e:
        os.close(request_fd)
        if e.exit_status == 2:
            sys.stderr.write(str(e) + "\n")
        else:
            reply_error(replies, str(e))
        raise
    except BaseException:
        os.close(request_fd)
        raise
    return os.fdopen(request_fd, "rb", buffering=1 << 16), replies, memory
