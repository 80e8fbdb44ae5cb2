"""Nested batches (dicts, tuples, lists, namedtuples of tensors and other
values) as a flat list of tensors plus a picklable description of the rest.

goldminer.DataLoader's workers send a collated batch this way (the tensors
through the data plane, the description as the batch's first tensor); the
trainer rebuilds it around the received tensors.
"""

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
    return ("v", obj)  # anything else (strings, numbers, other tensors) travels pickled


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
