"""The Python process a data worker (goldminer-dw) runs for a
goldminer.DataLoader: it holds the user's dataset and collate function and
turns batches of sampler positions into collated batches. With
--torchscript it runs a TorchScript worker program with the job's torch
instead (goldminer._dw_script). Run as `python -m goldminer._dw_child
[--torchscript --threads=N --saved-by=VERSION]` by
dw_daemon/python_program.cc; the pipe protocol is goldminer._dw_pipe's.
Anything the dataset prints goes to stderr, which is the worker's.
"""

import os
import pickle
import random
import struct
import sys
import traceback
import types

from goldminer._dw_pipe import NoSharedMemory, SharedMemory, of_environment, open_pipes, read, reply_error, reply_tensors


def _load_main(path):
    """The training script as __mp_main__ (and __main__), as
    multiprocessing's "spawn" does, so that its classes unpickle; its
    `if __name__ == "__main__":` block does not run."""
    module = types.ModuleType("__mp_main__")
    module.__file__ = path
    module.__builtins__ = __builtins__
    sys.modules["__mp_main__"] = module
    sys.modules["__main__"] = module
    with open(path, "rb") as f:
        code = compile(f.read(), path, "exec")
    exec(code, module.__dict__)


class Child:
    """The loader's settings on a worker (in_worker) or, for num_workers=0, in the trainer."""

    def __init__(self, settings, in_worker=True):
        import torch
        self.torch = torch
        self.dataset = settings["dataset"]
        self.sampler = settings["sampler"]
        self.shuffle = settings["shuffle"]
        self.seed = settings["seed"]
        self.length = settings["length"]
        self.collate = settings["collate_fn"]
        if self.collate is None:
            from torch.utils.data import default_collate
            self.collate = default_collate
        self.orders = {}
        self.in_worker = in_worker
        self.iterable = settings.get("iterable", False)
        self.shards = settings.get("shards", 1)
        self.batch_size = settings.get("batch_size", 1)
        self.drop_last = settings.get("drop_last", False)
        self.shard = None  # an IterableDataset's shard in progress: [key, iterator, next batch, next item]
        self.program = None  # the worker part of a split model (DataLoader(model=))
        if settings.get("program"):
            import io
            self.program = torch.jit.load(io.BytesIO(settings["program"]))
        if in_worker:
            torch.set_num_threads(1)  # as torch's DataLoader workers
            if settings.get("worker_init_fn") is not None:
                settings["worker_init_fn"](0)

    def seed_generators(self, seed):
        """random, torch and (if loaded) numpy, from `seed`."""
        random.seed(seed)
        self.torch.manual_seed(seed & 0x7FFFFFFFFFFFFFFF)
        if "numpy" in sys.modules:
            sys.modules["numpy"].random.seed(seed % (1 << 32))

    def order(self, epoch):
        """The dataset indices of the epoch, in sampler order (None: 0 .. length-1)."""
        if epoch in self.orders:
            return self.orders[epoch]
        torch = self.torch
        epoch_seed = (self.seed * 1000003 + epoch) & 0x7FFFFFFFFFFFFFFF
        if self.sampler is not None:
            if hasattr(self.sampler, "set_epoch"):
                self.sampler.set_epoch(epoch)
            torch.manual_seed(epoch_seed)  # a sampler without a generator draws from torch's
            order = list(self.sampler)
            if len(order) != self.length:
                raise RuntimeError("the sampler gave %d indices in epoch %d, and len(sampler) was %d on the trainer"
                                   % (len(order), epoch, self.length))
        elif self.shuffle:
            g = torch.Generator()
            g.manual_seed(epoch_seed)
            order = torch.randperm(self.length, generator=g).tolist()
        else:
            order = None
        if len(self.orders) >= 2:  # leases of two epochs may overlap at the turn, not more
            self.orders.pop(min(self.orders))
        self.orders[epoch] = order
        return order

    def batch(self, epoch, seed, positions):
        if self.in_worker:  # the trainer's own generators are left alone, as torch leaves them
            self.seed_generators(seed)
        order = self.order(epoch)
        items = []
        for p in positions:
            index = order[p] if order is not None else p
            try:
                items.append(self.dataset[index])
            except Exception as e:
                raise _DatasetError("dataset[%r] (position %d of epoch %d) raised %s: %s\n%s" % (
                    index, p, epoch, type(e).__name__, e, traceback.format_exc()), e) from None
        return self.finish(items, [order[p] if order is not None else p for p in positions])

    def shard_batch(self, epoch, shard, seed, index):
        """Batch `index` of shard `shard` of an IterableDataset: (first item,
        items, batch), or None past the shard's end. The dataset sees
        get_worker_info() = (shard, shards), as a torch worker would."""
        import itertools
        from torch.utils.data._utils import worker as torch_worker
        torch_worker._worker_info = torch_worker.WorkerInfo(id=shard, num_workers=self.shards, seed=seed,
                                                            dataset=self.dataset)
        key = (epoch, shard, seed)
        if self.shard is None or self.shard[0] != key or self.shard[2] > index:
            if self.in_worker:  # the shard's stream, the same each time it is made
                self.seed_generators(seed)
            self.shard = [key, iter(self.dataset), 0, 0]
        state = self.shard
        while True:
            try:
                items = list(itertools.islice(state[1], self.batch_size))
            except Exception as e:
                self.shard = None  # an iterator that raised is done: a re-run of the shard starts it again
                raise _DatasetError("the IterableDataset's shard %d of %d (item %d, epoch %d) raised %s: %s\n%s" % (
                    shard, self.shards, state[3], epoch, type(e).__name__, e, traceback.format_exc()), e) from None
            if not items or (self.drop_last and len(items) < self.batch_size):
                return None
            first = state[3]
            state[2] += 1
            state[3] += len(items)
            if state[2] > index:
                return first, len(items), self.finish(items, list(range(first, first + len(items))))

    def finish(self, items, indices):
        """The collated batch (and the model's worker part when there is one)."""
        try:
            batch = self.collate(items)
        except Exception as e:
            raise _DatasetError("collate_fn raised %s: %s on the batch of dataset indices %s\n%s" % (
                type(e).__name__, e, indices[:16], traceback.format_exc()), e) from None
        if self.program is None:
            return batch
        try:
            with self.torch.no_grad():
                out = self.program(*batch) if isinstance(batch, (tuple, list)) else self.program(batch)
        except Exception as e:
            raise _DatasetError("the model's worker part raised %s: %s\n%s" % (
                type(e).__name__, e, traceback.format_exc()), e) from None
        return tuple(out) if isinstance(out, (tuple, list)) else (out,)


class _DatasetError(RuntimeError):
    """A dataset or collate_fn that raised: the message names the index and holds the traceback;
    `environment` says whether the cause was the machine's (of_environment)."""

    def __init__(self, message, cause=None):
        super().__init__(message)
        self.environment = cause is not None and of_environment(cause)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    torchscript = argv[:1] == ["--torchscript"]
    try:
        requests, replies, memory = open_pipes(2 if torchscript else 1)
        (length,) = struct.unpack("<Q", read(requests, 8))
        settings_bytes = read(requests, length)
    except EOFError:
        return 0
    except NoSharedMemory as e:  # told already (open_pipes)
        return e.exit_status
    if torchscript:
        from goldminer import _dw_script
        return _dw_script.serve(argv[1:], settings_bytes, requests, replies, memory)
    try:
        if os.environ.get("GOLDMINER_PY_MAIN"):
            _load_main(os.environ["GOLDMINER_PY_MAIN"])
        child = Child(pickle.loads(settings_bytes))
    except Exception as e:
        reply_error(replies, "cannot load the DataLoader's dataset on this worker: %s: %s\n%s" % (
            type(e).__name__, e, traceback.format_exc()))
        return 1
    import torch
    from goldminer import _tree
    shared = SharedMemory(memory[0])
    reply_tensors(replies, [], shared)
    while True:
        try:
            if child.iterable:
                epoch, shard, seed, index = struct.unpack("<IIQQ", read(requests, 24))
            else:
                epoch, seed, n = struct.unpack("<IQI", read(requests, 16))
                positions = struct.unpack("<%dQ" % n, read(requests, 8 * n))
        except EOFError:
            return 0
        try:
            try:
                head = []
                if child.iterable:
                    made = child.shard_batch(epoch, shard, seed, index)
                    if made is None:
                        replies.write(b"\x03")
                        replies.flush()
                        continue
                    first, count, batch = made
                    head = [torch.tensor([first, count], dtype=torch.int64)]
                else:
                    batch = child.batch(epoch, seed, positions)
                tensors = []
                # JSON the trainer reads strictly (goldminer/_tree.py), not a pickle.
                spec = torch.frombuffer(bytearray(_tree.to_wire(batch, tensors)), dtype=torch.uint8)
                reply_tensors(replies, head + [spec] + tensors, shared)
            except _DatasetError as e:
                reply_error(replies, str(e), e.environment)
            except (BrokenPipeError, EOFError):
                raise
            except Exception as e:
                reply_error(replies, "%s: %s\n%s" % (type(e).__name__, e, traceback.format_exc()), of_environment(e))
        except BrokenPipeError:  # the worker is gone (stopped or killed): so is its batch
            return 0


if __name__ == "__main__":
    sys.exit(main())
