"""Checks the Python API: goldminer.split on models scripted here.

    python3 check_python_api.py MODELDIR   (MODELDIR from models.py, for the image pipeline)

Prints one line per check; exits non-zero on the first failure."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import goldminer  # noqa: E402
import models  # noqa: E402


def clone(x):
    if isinstance(x, torch.Tensor):
        return x.clone()
    if isinstance(x, dict):
        return {k: clone(v) for k, v in x.items()}
    return tuple(clone(v) for v in x)


def outputs(out):
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        return [out[k] for k in sorted(out)]
    return [t for o in out for t in outputs(o)]


def run_step(fn, x, seed, train):
    torch.manual_seed(seed)
    out = fn(x)
    if train:
        sum(o.sum() for o in outputs(out) if o.requires_grad).backward()
    return outputs(out)


def check(name, model, example, transform=None, mode="extended"):
    worker, trainer, report = goldminer.split(model, example, transform=transform, mode=mode, repeat=1)
    # The trainer holds a copy of the parameters: start both from the same state.
    model.load_state_dict({k[len("model."):]: v for k, v in trainer.state_dict().items()})
    results = []
    for train in (False, True):
        for m in (model, worker, trainer) + ((transform,) if transform is not None else ()):
            m.train(train)
        model.zero_grad()
        trainer.zero_grad()

        def original(x):
            if transform is not None:
                x = (transform(*x),)
            return model(*x)

        a = run_step(original, clone(example), 3, train)
        b = run_step(lambda x: trainer(*worker(*x)), clone(example), 3, train)
        equal = len(a) == len(b) and all(torch.equal(p, q) for p, q in zip(a, b))
        results.append(equal)
        if train:
            grads = dict(trainer.named_parameters())
            params = list(model.named_parameters())
            grads_equal = all(
                (p.grad is None and grads["model." + n].grad is None)
                or torch.equal(p.grad, grads["model." + n].grad)
                for n, p in params)
    line = "%s %s: eval %s, train outputs %s, grads %s (%d parameters, %d of %d nodes moved)" % (
        name, mode, "equal" if results[0] else "DIFFER", "equal" if results[1] else "DIFFER",
        "equal" if grads_equal else "DIFFER", len(params), report["nodes_moved"], report["nodes_total"])
    print(line)
    if not (results[0] and results[1] and grads_equal):
        sys.exit(1)
    return report


def main():
    modeldir = sys.argv[1]
    torch.manual_seed(0)
    report = check("dlrm", torch.jit.script(models.DLRM()), models.criteo_batch(32))
    keys = ["nodes_total", "nodes_stateless", "nodes_moved", "cut", "bytes_per_sample_before",
            "bytes_per_sample_after", "trainer_ms_saved_per_batch", "kept"]
    missing = [k for k in keys if k not in report]
    assert not missing, missing
    assert all({"name", "dtype", "shape", "bytes_per_sample"} <= set(c) for c in report["cut"])
    assert all({"node", "reason"} <= set(k) for k in report["kept"])
    print("report keys ok")
    # The trainer the cut is priced for: from where the parameters live
    # (here on the CPU, with no GPU visible) unless given.
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    dcn = torch.jit.script(models.DCN())
    _, _, auto = goldminer.split(dcn, models.criteo_batch(64), repeat=1, transfer_gbps=1.25)
    _, _, given = goldminer.split(dcn, models.criteo_batch(64), repeat=1, trainer_device="cuda", batch_size=4096)
    assert auto["trainer_device"] == expected and auto["link_source"] == "given", auto
    assert given["trainer_device"] == "cuda" and given["priced_batch_size"] == 4096, given
    assert given["link_source"] != "given" and given["link_gbps"] > 0, given
    assert given["candidates"] and given["chosen_because"], given
    print("trainer device %s by default here, cuda when given" % auto["trainer_device"])
    try:
        goldminer.split(dcn, models.criteo_batch(4), trainer_device="gpu")
    except ValueError as e:
        print("error: ValueError", e)
    mask = torch.tensor([1.0, 0.0, 1.0, 1.0])
    check("control", torch.jit.script(models.ControlFlow()), ({"x": torch.randn(4, 4), "mask": mask},), mode="max")
    transform = torch.jit.load(os.path.join(modeldir, "image_transform.pt"))
    resnet = torch.jit.load(os.path.join(modeldir, "resnet18.pt"))
    images = torch.load(os.path.join(modeldir, "resnet18_example.pt"))
    check("images", resnet, images, transform=transform)
    try:
        goldminer.split(models.DLRM(), models.criteo_batch(4))
    except TypeError as e:
        print("error: TypeError", e)
    try:
        goldminer.split(torch.jit.script(models.DLRM()), models.criteo_batch(4), method="predict")
    except ValueError as e:
        print("error: ValueError", e)


if __name__ == "__main__":
    main()
