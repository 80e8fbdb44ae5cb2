"""GoldMiner for Slurm: split a TorchScript training program and feed its
trainer from data workers.

    import goldminer
    worker, trainer, report = goldminer.split(scripted_model, example_inputs)
    for batch in goldminer.Session(...):
        ...
    for batch in goldminer.DataLoader(dataset, batch_size=32, shuffle=True, num_workers=2):
        ...   # a torch Dataset's own Python code, on data workers

Each name comes from its own module (split, and Session beneath
goldminer.session: C++ extensions), loaded on first use, so that importing
the package does not load libtorch twice or fail for a part that the caller
does not use. goldminer.split is the extension goldminer._split built for
the running torch: make's prebuilt one under the torch it was built for,
else one compiled against the running torch on first use and cached
(goldminer._split_build). `python -m goldminer --version` says which.
"""

_EXTENSIONS = {"split": "goldminer._split_build", "Session": "goldminer.session", "DataLoader": "goldminer.dataloader"}

__all__ = sorted(_EXTENSIONS)


def __getattr__(name):
    module = _EXTENSIONS.get(name)
    if module is None:
        raise AttributeError("module 'goldminer' has no attribute %r" % name)
    import importlib

    loaded = importlib.import_module(module)
    value = loaded.load().split if name == "split" else getattr(loaded, name)
    globals()[name] = value
    return value
