"""A training script as users write one: its Dataset and a namedtuple of its
items defined in the script itself, so that goldminer.DataLoader's workers
load the script as __mp_main__ (as torch's "spawn" does) to unpickle them,
and the trainer takes the namedtuple of a batch's description as this
script's class. test_dataloader_main.py runs it in an interpreter of its own
and reads what it measured, one JSON object on its last line of output:

    python3 training_script.py   ->  {"ids": [...], "collated_as_torch": true, ...}

Its training sits under `if __name__ == "__main__":`, as a script that the
workers load must have it."""
import collections
import json

import torch
from torch.utils.data import default_collate

import goldminer

Item = collections.namedtuple("Item", "id tag")


class ScriptDataset(torch.utils.data.Dataset):
    def __init__(self, n, bad=None):
        self.n, self.bad = n, bad

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.bad:
            raise ValueError("item %d is broken" % i)
        return {"id": i, "item": Item(i, "t%d" % i), "x": torch.full((3,), float(i))}


def same(a, b):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return type(a) is type(b) and list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def main():
    ds = ScriptDataset(200)
    loader = goldminer.DataLoader(ds, batch_size=16, shuffle=True, num_workers=2, seed=4)
    ids, collated, item_types = [], True, set()
    for batch in loader:
        batch_ids = batch["id"].tolist()
        ids += batch_ids
        collated = collated and same(batch, default_collate([ds[i] for i in batch_ids]))
        item_types.add(type(batch["item"]))
    loader.close()
    broken = goldminer.DataLoader(ScriptDataset(50, bad=21), batch_size=10, num_workers=1)
    error = None
    try:
        for _ in broken:
            pass
    except RuntimeError as e:
        error = str(e)
    finally:
        broken.close()
    print(json.dumps({"ids": ids, "collated_as_torch": collated,
                      "item_is_this_scripts_class": item_types == {Item}, "error": error}))


if __name__ == "__main__":
    main()
