"""goldminer.DataLoader: a torch DataLoader whose Dataset and collate
function run on GoldMiner data workers (goldminer-dw processes: started here
with num_workers, or the companion workers of `sbatch --goldminer`).

    loader = goldminer.DataLoader(dataset, batch_size=32, shuffle=True, num_workers=2)
    for epoch in range(epochs):
        for batch in loader:
            ...

The arguments mean what they mean to torch.utils.data.DataLoader. The
dataset, sampler, collate_fn and worker_init_fn travel to the workers by
pickle: classes by reference (importable there: the trainer's sys.path is
put first on theirs, as on a cluster's shared file system), and those the
training script defines by loading the script as __mp_main__ on the worker,
as torch does with the "spawn" start method (so its training must sit under
`if __name__ == "__main__":`).

How a batch is made: the trainer leases positions of the epoch's sampler
order ("index:N", N = len(sampler) or len(dataset)) to the workers, in
splits of a few batches, through the data plane (goldminer.Session); a
worker looks each position up in the same order (computed from the seed and
the epoch: torch.randperm for shuffle=True, the sampler after
sampler.set_epoch(epoch) and torch.manual_seed otherwise), calls
dataset[index] and collate_fn, and sends the tensors back. So every index of
the epoch is loaded exactly once, also when a worker is lost mid-epoch (its
splits go to another), and batches are those of torch's BatchSampler over
that order, delivered in that order (in_order=False: as they come).
Before each batch the worker seeds random, torch and numpy from the seed,
the epoch and the batch, so a batch made again is the same batch.

Differences from torch's DataLoader, by design:
  - one `for` over the loader yields the rest of the current epoch: a `for`
    left with `break` goes on where it stopped, and the next `for` after an
    epoch's end runs the next epoch (as goldminer.Session);
  - model=: a TorchScript model (torch.jit.script) that takes the collated
    batch (model(*batch), or model(batch) for one tensor); goldminer.split
    moves its stateless head (the part that reads no parameter) to the
    workers, after the collate. Batches are then that part's outputs, and
    `loader.model` (the rest, holding every parameter) takes them:
    loader.model(*batch) == model(*the batch torch would give).
    `loader.split_report` says what moved; split_options= goes to
    goldminer.split (trainer_device, mode, ...);
  - num_workers=0 outside `sbatch --goldminer` loads in this process, as
    torch does; inside it, the job's companion workers load;
  - with ranks (rank=/world_size=, else RANK/WORLD_SIZE) each rank's loader
    takes its share as goldminer.Session(rank=, world_size=) deals it (the
    same seed on every rank: 0 unless given); loading in process, every
    world_size-th position from the rank's, padded as DistributedSampler;
    a DistributedSampler given as sampler= deals instead;
  - pin_memory=True: batches are received into pinned memory (registered
    with CUDA by the session: no copy, unlike torch's pin_memory thread);
    device="cuda" (or "cuda:N") goes further: each batch's tensors are
    copied to that GPU on a side stream while the trainer works on the
    batch before (`prefetch` batches ahead, default 2) and handed over as
    CUDA tensors (goldminer/_staging.py); without CUDA or a GPU a
    RuntimeWarning says so and batches stay on the CPU;
  - multiprocessing_context, prefetch_factor, persistent_workers (the workers
    always persist) and pin_memory_device are accepted and mean nothing here;
  - an IterableDataset is cut into num_shards shards (default: num_workers,
    at least 1): shard s is the dataset iterated with get_worker_info()
    saying (id=s, num_workers=num_shards), as torch's worker s would see
    it, so a dataset that shards by worker info shards alike; each shard is
    one lease, its batches made in order (random, torch and numpy seeded
    from the lease's seed first), so a shard that a lost worker had begun is
    made again by another and its delivered batches skipped: exactly once
    if the dataset yields the same items each time it is iterated so. len()
    as torch's (from the dataset's len(), else TypeError); no ranks (the
    dataset shards by rank itself, as with torch); state_dict() resumes at
    the shard's next batch, made by iterating the shard again;
  - batch_sampler, and samplers that are not the same given torch's seed and
    set_epoch on every process (they run on each worker), are refused or
    must be avoided.
"""

import os
import pickle
import pickletools
import sys

import torch

from goldminer import _staging, _tree
from goldminer._dw_child import Child as _InProcess

_MAGIC = b"GOLDMINER-PYTHON 1\n"
_BATCHES_PER_SPLIT = 2


def _refers_to_main(data):
    """Whether a pickle names anything of __main__ (the training script):
    GLOBAL's argument is "module name", STACK_GLOBAL's module a string before it."""
    return any(isinstance(arg, str) and (arg == "__main__" or arg.startswith("__main__ "))
               for _, arg, _ in pickletools.genops(data))


def _ranks(rank, world_size):
    """(rank, world_size) as given, else from RANK and WORLD_SIZE (torchrun), else (0, 1)."""
    if world_size is None and os.environ.get("WORLD_SIZE"):
        world_size = int(os.environ["WORLD_SIZE"])
        rank = int(os.environ.get("RANK", "0")) if rank is None else rank
    return (rank or 0), (world_size or 1)


class DataLoader:
    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor=None, persistent_workers=False,
                 pin_memory_device="", seed=None, in_order=True, rank=None, world_size=None, model=None,
                 split_options=None, num_shards=None, session_options=None, device=None, prefetch=2):
        self.iterable = isinstance(dataset, torch.utils.data.IterableDataset)
        if self.iterable:
            if sampler is not None or shuffle:
                raise ValueError("goldminer.DataLoader: an IterableDataset takes no sampler or shuffle (as torch's "
                                 "DataLoader)")
            if num_shards is not None and int(num_shards) < 1:
                raise ValueError("goldminer.DataLoader: num_shards must be at least 1, not %r" % (num_shards,))
        elif num_shards is not None:
            raise ValueError("goldminer.DataLoader: num_shards is for an IterableDataset")
        elif not hasattr(dataset, "__getitem__") or not hasattr(dataset, "__len__"):
            raise TypeError("goldminer.DataLoader: dataset must be a map-style Dataset with __getitem__ and "
                            "__len__, not %s" % type(dataset).__name__)
        if batch_sampler is not None:
            raise ValueError("goldminer.DataLoader: batch_sampler is not supported; give sampler= and batch_size=")
        if batch_size is None or int(batch_size) < 1:
            raise ValueError("goldminer.DataLoader: batch_size must be at least 1, not %r" % (batch_size,))
        if sampler is not None and shuffle:
            raise ValueError("goldminer.DataLoader: sampler option is mutually exclusive with shuffle")
        if int(num_workers) < 0:
            raise ValueError("goldminer.DataLoader: num_workers option should be non-negative")
        if timeout < 0:
            raise ValueError("goldminer.DataLoader: timeout option should be non-negative")
        self.dataset = dataset
        self.batch_size = int(batch_size)
        self.sampler = sampler
        self.shuffle = bool(shuffle)
        self.num_workers = int(num_workers)
        self.collate_fn = collate_fn
        self.pin_memory = pin_memory
        self.device = _staging.cuda_device(device, "goldminer.DataLoader")
        self.prefetch = int(prefetch)
        self._stager = None
        self.drop_last = drop_last
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.in_order = in_order
        self._ranks = (rank, world_size)
        self._session_options = dict(session_options or {})
        if seed is None:  # like torch's: from its generator, so torch.manual_seed makes it repeatable
            seed = int(torch.empty((), dtype=torch.int64).random_(generator=generator).item())
            if world_size not in (None, 1) or os.environ.get("WORLD_SIZE", "1") != "1":
                seed = 0  # every rank must draw the same order (as DistributedSampler's seed=0)
        self.seed = int(seed) & 0x7FFFFFFFFFFFFFFF
        self.num_shards = int(num_shards) if num_shards is not None else max(1, self.num_workers)
        if self.iterable:  # its shards are the leased records; their batches come as the shards make them
            self.length = self.num_shards
        else:
            self.length = len(sampler) if sampler is not None else len(dataset)
        if self.length == 0:
            raise ValueError("goldminer.DataLoader: the %s is empty" % ("sampler" if sampler is not None else "dataset"))
        self._records = self.length - self.length % self.batch_size if drop_last and not self.iterable \
            else self.length
        if self._records == 0:
            raise ValueError("goldminer.DataLoader: drop_last with batch_size %d leaves none of the %d samples"
                             % (self.batch_size, self.length))
        self.model = None
        self.split_report = None
        self._worker_program = None
        if model is not None:
            self._split(model, dict(split_options or {}))
        self._session = None
        self._resume = None
        self._in_process = None
        self._in_process_epoch = 0
        self._in_process_next = 0

    def _split(self, model, options):
        """goldminer.split over a batch made here: the model's stateless head
        joins the workers' program (after the collate), the rest stays."""
        if not isinstance(model, torch.jit.ScriptModule):
            raise TypeError("goldminer.DataLoader: model must be a torch.jit.ScriptModule (torch.jit.script(m)), "
                            "not %s" % type(model).__name__)
        import io
        from goldminer import split
        here = _InProcess(self._settings(), in_worker=False)
        if self.iterable:
            made = here.shard_batch(0, 0, self.seed, 0)
            if made is None:
                raise ValueError("goldminer.DataLoader: model=: the dataset's shard 0 makes no batch to split on")
            example = made[2]
        else:
            example = here.batch(0, 0, range(min(self.batch_size, self._records)))
        if isinstance(example, torch.Tensor):
            example = (example,)
        if not isinstance(example, (tuple, list)) or not all(isinstance(t, torch.Tensor) for t in example):
            raise TypeError("goldminer.DataLoader: model= needs batches that are a tensor or a tuple/list of "
                            "tensors (the model's inputs), not %s" % type(example).__name__)
        worker, self.model, self.split_report = split(model, tuple(example), **options)
        buffer = io.BytesIO()
        torch.jit.save(worker, buffer)
        self._worker_program = buffer.getvalue()

    def _settings(self):
        return {"dataset": self.dataset, "collate_fn": self.collate_fn, "sampler": self.sampler,
                "shuffle": self.shuffle, "seed": self.seed, "length": self.length,
                "worker_init_fn": self.worker_init_fn, "program": self._worker_program,
                "iterable": self.iterable, "shards": self.num_shards, "batch_size": self.batch_size,
                "drop_last": self.drop_last}

    def _program(self):
        data = pickle.dumps(self._settings(), protocol=pickle.HIGHEST_PROTOCOL)
        lines = [b"python=" + os.fsencode(sys.executable), b"mode=" + (b"iterable" if self.iterable else b"map")]
        lines += [b"path=" + os.fsencode(os.path.abspath(p or ".")) for p in sys.path]
        main = getattr(sys.modules.get("__main__"), "__file__", None)
        if main and _refers_to_main(data):
            lines.append(b"main=" + os.fsencode(os.path.abspath(main)))
        return _MAGIC + b"\n".join(lines) + b"\n\n" + data

    def _loads_here(self):
        """num_workers=0 and no GoldMiner workers to come: load in this process, as torch does."""
        return self.num_workers == 0 and not os.environ.get("GOLDMINER_LISTEN")

    @property
    def session(self):
        """The goldminer.Session that feeds this loader (started on first use)."""
        if self._session is None and not self._loads_here():
            from goldminer import Session
            rank, world_size = self._ranks
            options = dict(program=self._program(), workers=self.num_workers, seed=self.seed, shuffle_buffer=0,
                           deterministic=self.in_order, shuffle_splits=False,
                           records_per_split=self.batch_size * _BATCHES_PER_SPLIT, timeout=self.timeout,
                           resume=self._resume)
            if world_size is not None:
                options.update(rank=rank, world_size=world_size)
            if self.iterable:  # a split per shard; each rank's dataset shards by rank itself (as with torch)
                options.update(records_per_split=1, rank=0, world_size=1)
            batch_size = 1 if self.iterable else self.batch_size
            if self.sampler is not None and isinstance(self.sampler, torch.utils.data.DistributedSampler):
                options.update(rank=0, world_size=1)  # the sampler deals to the ranks already
            if self.pin_memory or self.device is not None:
                options.update(pin_memory=True, cuda_device=self.device.index if self.device is not None else -1)
            options.update(self._session_options)
            self._session = Session("index:%d" % self._records, batch_size, **options)
        return self._session

    def _positions_here(self):
        """The positions this rank loads in process: all of them, or with ranks
        every world_size-th from `rank`, padded to the same count on every
        rank (as torch's DistributedSampler)."""
        rank, world_size = _ranks(*self._ranks)
        if self.sampler is not None and isinstance(self.sampler, torch.utils.data.DistributedSampler):
            world_size = 1
        if world_size <= 1:
            return range(self._records)
        per_rank = (self._records + world_size - 1) // world_size
        return [(rank + k * world_size) % self._records for k in range(per_rank)]

    def __len__(self):
        if self.iterable:  # as torch's DataLoader: from the dataset's len(), if it has one
            n = len(self.dataset)
            return n // self.batch_size if self.drop_last else (n + self.batch_size - 1) // self.batch_size
        if self._loads_here():
            return (len(self._positions_here()) + self.batch_size - 1) // self.batch_size
        return len(self.session)

    def set_epoch(self, epoch):
        """Makes the next `for` run epoch `epoch` (a no-op when it would anyway)."""
        state = self.state_dict()
        if state["epoch"] == epoch and not state.get("done") and not state.get("partial"):
            return
        if self._loads_here():
            self._in_process_epoch, self._in_process_next = epoch, 0
            return
        self.load_state_dict({"epoch": epoch, "seed": state["seed"], "plan": state["plan"], "bad_records": 0,
                              "done": [], "partial": []})

    def state_dict(self):
        """The position of what iteration returned so far (plain data): load_state_dict()
        on a loader over the same dataset and settings goes on from there."""
        if self._loads_here():
            return {"epoch": self._in_process_epoch, "seed": self.seed, "next_batch": self._in_process_next}
        state = self.session.state()
        return self._stager.adjust(state) if self._stager is not None else state

    def load_state_dict(self, state):
        if self._loads_here():
            self._in_process_epoch, self._in_process_next = int(state["epoch"]), int(state.get("next_batch", 0))
            return
        self.close()
        self._resume = dict(state)
        self.seed = int(state["seed"])

    def close(self):
        """Stops the workers this loader started (also when it is collected)."""
        self._stager = None
        if self._session is not None:
            self._session.close()
            self._session = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _pinned(self, batch):
        """A batch loaded in this process, as torch's DataLoader hands it: pinned
        by a copy (pin_memory), here also moved to `device`."""
        if not (self.pin_memory or self.device is not None) or not torch.cuda.is_available():
            return batch
        tensors = []
        desc = _tree.flatten(batch, tensors)
        moved = [t.pin_memory() for t in tensors]
        if self.device is not None:
            moved = [t.to(self.device, non_blocking=True) for t in moved]
        return _tree.unflatten(desc, moved)

    def _received(self):
        """The next batch from the session, rebuilt; StopIteration at the epoch's end."""
        received = next(self.session)
        # The batch's structure as the worker described it: JSON read
        # strictly (goldminer/_tree.py), never unpickled.
        return _tree.from_wire(received[0].numpy().tobytes(), received[1:])

    def __iter__(self):
        if self._loads_here():
            yield from self._iter_in_process()
            return
        if self.device is not None:
            if self._stager is None:
                session = self.session
                self._stager = _staging.Stager(lambda: (self._received(), session.last_batch, None),
                                               lambda: session.metrics()["queue_batches"], self.device,
                                               self.prefetch)
            take = self._stager.__next__
        elif self.pin_memory and torch.cuda.is_available() and not self.session.receive_memory.startswith("pinned"):
            # pin_memory where the session could not receive into pinned
            # memory (a build without CUDA) but torch can pin: by a copy, as torch does.
            take = lambda: self._pinned(self._received())  # noqa: E731
        else:
            take = self._received
        while True:
            try:
                batch = take()
            except StopIteration:
                return
            yield batch

    def _iter_in_process(self):
        if self._in_process is None:
            self._in_process = _InProcess(self._settings(), in_worker=False)
        if self.iterable:  # the shards one after the other, as workers would make them
            for shard in range(self.num_shards):
                k = 0
                while True:
                    made = self._in_process.shard_batch(self._in_process_epoch, shard, self.seed, k)
                    if made is None:
                        break
                    k += 1
                    yield self._pinned(made[2])
            self._in_process_epoch += 1
            return
        mine = self._positions_here()
        batches = (len(mine) + self.batch_size - 1) // self.batch_size
        while self._in_process_next < batches:
            k = self._in_process_next
            positions = mine[k * self.batch_size:(k + 1) * self.batch_size]
            batch = self._in_process.batch(self._in_process_epoch, 0, positions)
            self._in_process_next += 1
            yield self._pinned(batch)
        self._in_process_epoch += 1
        self._in_process_next = 0
