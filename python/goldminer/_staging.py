"""Batches handed to the trainer on its GPU: each batch's tensors are copied
host-to-device on a side CUDA stream while the trainer still works on the
batch before it (goldminer.Session(device=...), goldminer.DataLoader(device=...)).

The copies read the session's receive buffers in place: with pin_memory
those are pinned (registered with CUDA by the session, tw_lib/session/receive_memory.h),
so each copy runs asynchronously and no host copy is made. The trainer's
stream waits for a batch's copy when next() hands it over (an event, not a
host wait), and each tensor is recorded on that stream, so its memory is
reused only after the trainer's work on it.

Ahead of next() means: after it takes a batch, the stager also takes the
batches the session already has queued (without waiting for any), up to
`prefetch`, and starts their copies. A batch taken ahead is not yet the
trainer's: state() leaves it out (adjust()), so a resumed run gets it again.
"""

import collections
import warnings

import torch

from goldminer import _tree


def cuda_device(device, who, stacklevel=3):
    """torch.device('cuda', N) for `device`, or None for the CPU: also,
    with a warning saying why, when this torch has no CUDA or sees no GPU."""
    if device is None:
        return None
    try:
        d = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise ValueError("%s: device %r: %s" % (who, device, e)) from None
    if d.type == "cpu":
        return None
    if d.type != "cuda":
        raise ValueError("%s: device %r: only 'cuda', 'cuda:N' or 'cpu'" % (who, device))
    if not torch.cuda.is_available():
        why = ("this torch was built without CUDA" if torch.version.cuda is None
               else "torch sees no GPU (torch.cuda.is_available() is False)")
        warnings.warn("%s: device=%r: %s; batches stay on the CPU" % (who, str(device), why),
                      RuntimeWarning, stacklevel=stacklevel)
        return None
    if d.index is None:
        d = torch.device("cuda", torch.cuda.current_device())
    if d.index >= torch.cuda.device_count():
        raise ValueError("%s: device %r: torch sees %d GPU(s)" % (who, str(device), torch.cuda.device_count()))
    return d


class _Staged:
    __slots__ = ("batch", "moved", "host", "event", "identity", "extra")

    def __init__(self, batch, moved, host, event, identity, extra):
        self.batch, self.moved, self.host, self.event = batch, moved, host, event
        self.identity, self.extra = identity, extra


class Stager:
    """next() hands out pull()'s batches on `device`, copied ahead.

    pull() -> (host batch, identity, extra): the next batch of the epoch
    (nested tuples, lists, dicts of tensors), its (epoch, split id,
    sequence), and anything to keep with it; StopIteration at the epoch's
    end. queued() -> how many batches pull() returns without waiting.
    """

    def __init__(self, pull, queued, device, prefetch=2):
        if prefetch < 1:
            raise ValueError("prefetch must be at least 1")
        self._pull, self._queued, self.device, self.prefetch = pull, queued, device, prefetch
        self._stream = torch.cuda.Stream(device)
        self._ready = collections.deque()
        self._copying = collections.deque()  # (event, host tensors) of handed-out batches
        self._ended = False  # the epoch's end was seen while taking ahead
        self._error = None   # an error seen while taking ahead: raised in its turn
        self.last_extra = None

    def _stage(self):
        batch, identity, extra = self._pull()
        tensors = []
        desc = _tree.flatten(batch, tensors)
        with torch.cuda.stream(self._stream):
            moved = [t.to(self.device, non_blocking=True) for t in tensors]
            event = torch.cuda.Event()
            event.record(self._stream)
        # The host tensors stay referenced until the event (see __next__).
        self._ready.append(_Staged(_tree.unflatten(desc, moved), moved, tensors, event, identity, extra))

    def __next__(self):
        # A handed-out batch's host tensors (its receive buffer) stay until
        # its copy is done: the buffer goes back to the session's pool, to be
        # received into again, when they go.
        while self._copying and self._copying[0][0].query():
            self._copying.popleft()
        if not self._ready:
            if self._error is not None:
                error, self._error = self._error, None
                raise error
            if self._ended:
                self._ended = False
                raise StopIteration
            self._stage()  # waits for the batch; StopIteration at the epoch's end
        item = self._ready.popleft()
        while not self._ended and self._error is None and len(self._ready) < self.prefetch and self._queued() > 0:
            try:
                self._stage()
            except StopIteration:
                self._ended = True
            except Exception as e:  # the batch in hand is still the trainer's
                self._error = e
        current = torch.cuda.current_stream(self.device)
        current.wait_event(item.event)
        for t in item.moved:
            t.record_stream(current)
        self._copying.append((item.event, item.host))
        self.last_extra = item.extra
        return item.batch

    def held(self):
        """Identities of the batches taken ahead and not yet handed out."""
        return [item.identity for item in self._ready]

    def adjust(self, state):
        """`state` (Session.state()) as if the batches taken ahead had not been.
        Its bad_records still counts corrupt records skipped in them
        (max_bad_records: a resumed run's budget is that much smaller)."""
        return without_held(state, self.held())


def without_held(state, held):
    """A position (Session.state()) less the batches `held` [(epoch, split id,
    sequence)], which are each the last taken of their split (a split's
    batches come in sequence)."""
    if not held:
        return state
    first = {}
    for _epoch, split, sequence in held:
        first[split] = min(first.get(split, sequence), sequence)
    state = dict(state)
    partial = collections.OrderedDict((s, n) for s, n in state["partial"])
    state["done"] = [s for s in state["done"] if s not in first]
    for split, sequence in first.items():
        if sequence > 0:
            partial[split] = sequence
        else:
            partial.pop(split, None)
    state["partial"] = [[s, n] for s, n in partial.items()]
    return state
