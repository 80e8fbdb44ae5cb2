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
"""

import warnings

from goldminer import _session, _staging


class Session(_session.Session):
    __doc__ = __doc__ + "\n" + (_session.Session.__doc__ or "")

    def __init__(self, input, batch_size=256, *, device=None, pin_memory=False, prefetch=2, numa_node=None, **kwargs):
        dev = _staging.cuda_device(device, "goldminer.Session")
        super().__init__(input, batch_size, pin_memory=bool(pin_memory or dev is not None), numa_node=numa_node,
                         cuda_device=dev.index if dev is not None else -1, **kwargs)
        for w in self.receive_memory_warnings:
            warnings.warn("goldminer.Session: " + w, RuntimeWarning, stacklevel=2)
        self.device = dev
        self._stager = None
        if dev is not None:
            self._stager = _staging.Stager(self._pull_host, lambda: self.metrics()["queue_batches"], dev, prefetch)

    def _pull_host(self):
        """(the next host batch, its (epoch, split id, sequence), its sample ids):
        what the stager takes; StopIteration at the epoch's end."""
        batch = _session.Session.__next__(self)
        return batch, self.last_batch, _session.Session.last_sample_ids.__get__(self)

    def __iter__(self):
        return self

    def __next__(self):
        if self._stager is None:
            return super().__next__()
        return next(self._stager)

    @property
    def last_sample_ids(self):
        """int64 [B, 2] (file index, record index) of each sample of the last batch
        next() returned (on the CPU), or None."""
        return self._stager.last_extra if self._stager is not None else super().last_sample_ids

    def state(self):
        """The data position of what next() returned so far (see help(goldminer._session))."""
        state = super().state()
        return self._stager.adjust(state) if self._stager is not None else state
