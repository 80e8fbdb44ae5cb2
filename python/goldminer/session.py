"""goldminer.Session: the trainer session (the C++ extension goldminer._session,
whose help() documents every argument) plus the GPU hand-over:

    Session(..., pin_memory=True)     batches received into pinned memory
    Session(..., device="cuda")       batches handed over as CUDA tensors,
                                      copied on a side stream ahead of next()
                                      (implies pin_memory)
    Session(..., numa_node=N)         receive buffers on NUMA node N (default:
                                      the node nearest the GPU, when there is one)

Without CUDA (a build without --with-cuda, a torch without CUDA, no GPU) a
RuntimeWarning says which and batches stay pageable / on the CPU.

The extension links no libtorch: its batches are DLPack capsules that this
module makes torch tensors of (no copy), and the program= argument becomes
bytes here, with this process's torch. A TorchScript program is sent as a
Python program ("mode=torchscript") that the workers run with this Python
and torch, when they are local threads (no libtorch in this process) or
when this torch is not the libtorch goldminer-dw links
(_session.LIBTORCH_VERSION).
"""

import io
import os
import re
import sys
import warnings

import torch
import torch.utils.dlpack

from goldminer import _session, _staging

_PYTHON_PROGRAM = b"GOLDMINER-PYTHON 1\n"


def _tensor(capsule):
    """A torch tensor viewing what a capsule of the extension views. A bool
    tensor leaves as int8 (DLPack 0.6 has no bool; the wire has no int8)."""
    t = torch.utils.dlpack.from_dlpack(capsule)
    return t.view(torch.bool) if t.dtype == torch.int8 else t


def _program_bytes(program):
    """The bytes of program= (None: no program)."""
    if program is None or isinstance(program, bytes):
        return program
    if isinstance(program, (bytearray, memoryview)):
        return bytes(program)
    if isinstance(program, (str, os.PathLike)):
        with open(program, "rb") as f:
            return f.read()
    if isinstance(program, torch.jit.ScriptModule):
        buffer = io.BytesIO()
        torch.jit.save(program, buffer)
        return buffer.getvalue()
    raise TypeError("goldminer.Session: program must be None, a torch.jit.ScriptModule, bytes or a path, not "
                    + str(type(program)))


def _release(version):
    """"1.13.0" of "1.13.0a0+gitabc" and "1.13.0": the release a build of torch
    is of (Debian's python3-torch says 1.13.0a0, its libtorch 1.13.0)."""
    m = re.match(r"\d+(\.\d+)*", version)
    return m.group(0) if m else version


def _worker_program(data, transport):
    """The program workers get: a TorchScript program wrapped as a Python
    program run with this torch, where the workers have no libtorch of this
    torch's version (local threads: none at all)."""
    if not data or data.startswith(_PYTHON_PROGRAM):
        return data
    if transport != "local" and _release(torch.__version__) == _release(_session.LIBTORCH_VERSION):
        return data
    lines = [b"python=" + os.fsencode(sys.executable)]
    lines += [b"path=" + os.fsencode(os.path.abspath(p)) for p in sys.path if isinstance(p, str) and p]
    lines += [b"mode=torchscript", b"torch=" + torch.__version__.encode()]
    return _PYTHON_PROGRAM + b"\n".join(lines) + b"\n\n" + data


class Session(_session.Session):
    __doc__ = __doc__ + "\n" + (_session.Session.__doc__ or "")

    def __init__(self, input, batch_size=_session.DEFAULT_BATCH_SIZE, *, device=None, pin_memory=False, prefetch=2,
                 numa_node=None, program=None, transport="ucx", **kwargs):
        dev = _staging.cuda_device(device, "goldminer.Session")
        super().__init__(input, batch_size, pin_memory=bool(pin_memory or dev is not None), numa_node=numa_node,
                         cuda_device=dev.index if dev is not None else -1,
                         program=_worker_program(_program_bytes(program), transport), transport=transport,
                         **kwargs)
        for w in self.receive_memory_warnings:
            warnings.warn("goldminer.Session: " + w, RuntimeWarning, stacklevel=2)
        self.device = dev
        self._stager = None
        if dev is not None:
            self._stager = _staging.Stager(self._pull_host, lambda: self.metrics()["queue_batches"], dev, prefetch)

    def _pull_host(self):
        """(the next host batch, its (epoch, split id, sequence), its sample ids):
        what the stager takes; StopIteration at the epoch's end."""
        batch = tuple(_tensor(c) for c in _session.Session.__next__(self))
        return batch, self.last_batch, self._host_sample_ids()

    def _host_sample_ids(self):
        ids = _session.Session.last_sample_ids.__get__(self)
        return None if ids is None else _tensor(ids)

    def __iter__(self):
        return self

    def __next__(self):
        if self._stager is None:
            return tuple(_tensor(c) for c in super().__next__())
        return next(self._stager)

    @property
    def last_sample_ids(self):
        """int64 [B, 2] (file index, record index) of each sample of the last batch
        next() returned (on the CPU), or None."""
        return self._stager.last_extra if self._stager is not None else self._host_sample_ids()

    def state(self):
        """The data position of what next() returned so far (see help(goldminer._session))."""
        state = super().state()
        return self._stager.adjust(state) if self._stager is not None else state
