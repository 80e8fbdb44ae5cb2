"""Nested batches (dicts, tuples, lists, namedtuples of tensors and other
values) as a flat list of tensors plus a description of the rest.

flatten/unflatten: in this process (pinning, staging to a GPU).
to_wire/from_wire: goldminer.DataLoader's workers send a collated batch this
way (the tensors through the data plane, the description, JSON read
strictly, as the batch's first tensor); the trainer rebuilds it around the
received tensors without unpickling anything.
"""

import json
import math
import sys

import torch

# The tensor dtypes the data plane carries (gmcore/wire.h DType): value on the wire.
WIRE_DTYPES = {torch.uint8: 1, torch.int32: 2, torch.int64: 3, torch.float32: 4, torch.float64: 5, torch.bool: 6}


def flatten(obj, tensors):
    """The description of `obj`; its tensors are appended to `tensors`."""
    if isinstance(obj, torch.Tensor) and obj.dtype in WIRE_DTYPES and obj.layout == torch.strided \
            and not obj.requires_grad:
        tensors.append(obj)
        return ("t", len(tensors) - 1)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # a namedtuple
        return ("n", type(obj), [flatten(v, tensors) for v in obj])
    if type(obj) in (tuple, list):
        return ("l", type(obj), [flatten(v, tensors) for v in obj])
    if isinstance(obj, dict):
        return ("d", type(obj), [(k, flatten(v, tensors)) for k, v in obj.items()])
    return ("v", obj)  # anything else (strings, numbers, other tensors): as it is


def unflatten(desc, tensors):
    """`obj` again from flatten's description and the tensors."""
    kind = desc[0]
    if kind == "t":
        return tensors[desc[1]]
    if kind == "n":
        return desc[1](*[unflatten(d, tensors) for d in desc[2]])
    if kind == "l":
        return desc[1](unflatten(d, tensors) for d in desc[2])
    if kind == "d":
        items = [(k, unflatten(d, tensors)) for k, d in desc[2]]
        try:
            return desc[1](items)
        except TypeError:  # a mapping type that cannot be built from pairs: as default_collate does
            return dict(items)
    return desc[1]


# --- On the wire: a worker's batch description as JSON, never a pickle ---
#
# A worker sends the trainer the description of each batch's structure
# (the tensors travel apart). It is JSON read strictly: only these forms,
# depth at most MAX_DEPTH, and classes only by name from modules this
# process has already imported (nothing is imported, no __reduce__ runs),
# each checked to be a namedtuple or dict class and built without calling
# code of a namedtuple class. So a worker (or anyone who impersonates one)
# can make the trainer build only plain values, never run code.
#   ["t", i]                        tensors[i], a data-plane dtype
#   ["x", i, dtype, shape, grad]    tensors[i] holds the bytes of a tensor of
#                                   another dtype (float16, ...), or one that
#                                   requires grad
#   ["v", value]                    None, bool, int, float or str
#   ["b", hex]                      bytes
#   ["l", "tuple"|"list", [desc...]]
#   ["n", "module:qualname", [desc...]]        a namedtuple
#   ["d", "dict"|"module:qualname", [[key, desc]...]]  keys ["v", ...] or ["b", ...]

WIRE_FORMAT = 1
MAX_DEPTH = 64
MAX_DESCRIPTION = 64 << 20  # bytes of JSON


class BatchError(ValueError):
    """A batch description that is not one this module writes."""


def _class_name(cls):
    return "%s:%s" % (cls.__module__, cls.__qualname__)


def _scalar(obj):
    return obj is None or type(obj) in (bool, int, float, str)


def _to_wire(obj, tensors, depth):
    if depth > MAX_DEPTH:
        raise TypeError("goldminer: a batch nested deeper than %d levels cannot travel from a worker" % MAX_DEPTH)
    if isinstance(obj, torch.Tensor):
        if obj.layout != torch.strided:
            raise TypeError("goldminer: a %s tensor in a batch cannot travel from a worker (strided only)" % obj.layout)
        if obj.dtype in WIRE_DTYPES and not obj.requires_grad:
            tensors.append(obj)
            return ["t", len(tensors) - 1]
        t = obj.detach().contiguous()
        tensors.append(t.reshape(-1).view(torch.uint8) if t.numel() else torch.empty(0, dtype=torch.uint8))
        return ["x", len(tensors) - 1, str(t.dtype).replace("torch.", ""), list(t.shape), bool(obj.requires_grad)]
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return ["n", _class_name(type(obj)), [_to_wire(v, tensors, depth + 1) for v in obj]]
    if type(obj) in (tuple, list):
        return ["l", type(obj).__name__, [_to_wire(v, tensors, depth + 1) for v in obj]]
    if isinstance(obj, dict):
        keys = []
        for k in obj:
            if _scalar(k):
                keys.append(["v", k])
            elif type(k) is bytes:
                keys.append(["b", k.hex()])
            else:
                raise TypeError("goldminer: a batch dict key of type %s cannot travel from a worker "
                                "(str, int, float, bool, None or bytes)" % type(k).__name__)
        name = "dict" if type(obj) is dict else _class_name(type(obj))
        return ["d", name, [[k, _to_wire(v, tensors, depth + 1)] for k, v in zip(keys, obj.values())]]
    if _scalar(obj):
        return ["v", obj]
    if type(obj) is bytes:
        return ["b", obj.hex()]
    raise TypeError("goldminer: a batch value of type %s cannot travel from a worker (tensors, None, bool, int, "
                    "float, str, bytes, and tuples, lists, namedtuples and dicts of them)" % type(obj).__name__)


def to_wire(obj, tensors):
    """The JSON bytes describing `obj`; its tensors are appended to `tensors`.
    TypeError names a value that cannot travel."""
    return json.dumps([WIRE_FORMAT, _to_wire(obj, tensors, 0)], separators=(",", ":")).encode()


def _resolve(name, base, what):
    """The class `name` ("module:qualname") names, from an already imported
    module only, if it is a subclass of `base`."""
    module, _, qualname = name.partition(":")
    if module == "__mp_main__" and module not in sys.modules:
        module = "__main__"  # the training script, as the worker loaded it (dataloader.py)
    if not module or not qualname or module not in sys.modules:
        raise BatchError("%s class %r: not a class of a module this process imported" % (what, name[:200]))
    obj = sys.modules[module]
    for part in qualname.split("."):
        if not part.isidentifier() or part.startswith("__"):
            raise BatchError("%s class %r: not a class name" % (what, name[:200]))
        obj = getattr(obj, part, None)
    if not isinstance(obj, type) or not issubclass(obj, base):
        raise BatchError("%s class %r: not a %s class" % (what, name[:200], base.__name__))
    return obj


def _from_wire(desc, tensors, used, depth):
    if depth > MAX_DEPTH:
        raise BatchError("nested deeper than %d levels" % MAX_DEPTH)
    if not isinstance(desc, list) or not desc or not isinstance(desc[0], str):
        raise BatchError("expected [kind, ...], got %s" % type(desc).__name__)
    kind, n = desc[0], len(desc)
    if kind in ("t", "x"):
        if n != (2 if kind == "t" else 5) or type(desc[1]) is not int or not 0 <= desc[1] < len(tensors):
            raise BatchError("tensor reference %r: no such tensor of %d" % (desc[:2], len(tensors)))
        i = desc[1]
        if i in used:
            raise BatchError("tensor %d referenced twice" % i)
        used.add(i)
        if kind == "t":
            return tensors[i]
        dtype = getattr(torch, desc[2], None) if isinstance(desc[2], str) else None
        shape = desc[3]
        if not isinstance(dtype, torch.dtype):
            raise BatchError("tensor %d: unknown dtype %r" % (i, str(desc[2])[:40]))
        if not isinstance(shape, list) or len(shape) > 64 or any(type(d) is not int or d < 0 for d in shape):
            raise BatchError("tensor %d: bad shape" % i)
        raw = tensors[i]
        try:
            itemsize = torch.empty(0, dtype=dtype).element_size()
        except (RuntimeError, TypeError):
            raise BatchError("tensor %d: dtype %s cannot be made here" % (i, desc[2])) from None
        if raw.dtype != torch.uint8 or raw.dim() != 1 or raw.numel() != math.prod(shape) * itemsize:
            raise BatchError("tensor %d: %d bytes for a %s tensor of shape %s" % (i, raw.numel(), desc[2], shape))
        t = (raw.view(dtype) if raw.numel() else torch.empty(0, dtype=dtype)).reshape(shape)
        return t.requires_grad_() if desc[4] is True else t
    if kind == "v":
        if n != 2 or not _scalar(desc[1]):
            raise BatchError("value: not None, bool, int, float or str")
        return desc[1]
    if kind == "b":
        if n != 2 or not isinstance(desc[1], str):
            raise BatchError("bytes: not a hex string")
        try:
            return bytes.fromhex(desc[1])
        except ValueError:
            raise BatchError("bytes: not a hex string") from None
    if kind in ("l", "n", "d"):
        if n != 3 or not isinstance(desc[1], str) or not isinstance(desc[2], list):
            raise BatchError("%s: expected [%r, type, items]" % (kind, kind))
    if kind == "l":
        if desc[1] not in ("tuple", "list"):
            raise BatchError("sequence type %r: tuple or list only" % desc[1][:40])
        items = [_from_wire(d, tensors, used, depth + 1) for d in desc[2]]
        return tuple(items) if desc[1] == "tuple" else items
    if kind == "n":
        cls = _resolve(desc[1], tuple, "namedtuple")
        fields = getattr(cls, "_fields", None)
        if not isinstance(fields, tuple) or len(fields) != len(desc[2]):
            raise BatchError("namedtuple class %r: %d values for its fields" % (desc[1][:200], len(desc[2])))
        # tuple.__new__: no code of the class runs (what namedtuple's _make does).
        return tuple.__new__(cls, [_from_wire(d, tensors, used, depth + 1) for d in desc[2]])
    if kind == "d":
        cls = dict if desc[1] == "dict" else _resolve(desc[1], dict, "dict")
        items = []
        for pair in desc[2]:
            if not isinstance(pair, list) or len(pair) != 2 or not isinstance(pair[0], list) or \
                    not pair[0] or pair[0][0] not in ("v", "b"):
                raise BatchError("dict item: expected [[\"v\" or \"b\", key], value]")
            items.append((_from_wire(pair[0], tensors, used, depth + 1), _from_wire(pair[1], tensors, used, depth + 1)))
        if cls is dict:
            return dict(items)
        try:
            return cls(items)
        except TypeError:  # a mapping type that cannot be built from pairs: as default_collate does
            return dict(items)
    raise BatchError("unknown kind %r" % kind[:20])


def from_wire(data, tensors):
    """The batch that to_wire described, around the received `tensors`.
    BatchError (a ValueError) says what in `data` is not to_wire's."""
    if len(data) > MAX_DESCRIPTION:
        raise BatchError("batch description of %d bytes (at most %d)" % (len(data), MAX_DESCRIPTION))
    try:
        doc = json.loads(bytes(data).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise BatchError("batch description is not JSON: %s" % e) from None
    if not isinstance(doc, list) or len(doc) != 2 or doc[0] != WIRE_FORMAT:
        raise BatchError("batch description: not format %d (a worker of another goldminer version?)" % WIRE_FORMAT)
    used = set()
    batch = _from_wire(doc[1], tensors, used, 0)
    if len(used) != len(tensors):
        raise BatchError("batch description: %d of %d tensors unused" % (len(tensors) - len(used), len(tensors)))
    return batch
