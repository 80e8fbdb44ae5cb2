"""Models for the split tests and benchmark, scripted at test time.

    python3 models.py OUTDIR          # test models, small batches
    python3 models.py OUTDIR --bench  # benchmark models: DLRM at batch 4096, ResNet-50

Writes NAME.pt (torch.jit.save) and NAME_example.pt (torch.save of the tuple
of example inputs) for every model, plus the files for the bad-input tests.
"""
import os
import sys
from typing import Dict, List, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

NUM_DENSE = 13
NUM_CAT = 26


# ---------------------------------------------------------------- (a) DLRM
class DLRM(nn.Module):
    """DLRM-style model on the Criteo schema (13 dense, 26 categorical).

    forward starts with the feature transforms of a recommendation pipeline
    (fill-missing, log1p, normalize, bucketize + one-hot, hash-modulo), then
    embeddings, the bottom MLP, the pairwise feature interaction and the top
    MLP."""

    def __init__(self, hash_size: int = 2000, dim: int = 16, hash_rounds: int = 4):
        super().__init__()
        self.hash_size = hash_size  # plain int attributes: frozen on the worker
        self.hash_rounds = hash_rounds
        self.boundaries = [0.5 * i for i in range(1, 16)]  # log1p space, 16 buckets
        self.num_buckets = 16
        self.embs = nn.ModuleList([nn.Embedding(hash_size, dim) for _ in range(NUM_CAT)])
        self.bottom = nn.Sequential(
            nn.Linear(NUM_DENSE + NUM_DENSE * self.num_buckets, 64), nn.ReLU(), nn.Linear(64, dim), nn.ReLU())
        n = NUM_CAT + 1
        self.num_features = n
        self.top = nn.Sequential(nn.Linear(dim + n * (n - 1) // 2, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, dense: Tensor, cat: Tensor) -> Tensor:
        # Feature transforms: stateless, may move to the data workers.
        dense = torch.where(torch.isnan(dense), torch.zeros_like(dense), dense)  # fill missing
        x = torch.log1p(torch.clamp(dense, min=0.0))
        xn = F.normalize(x, p=2.0, dim=1)
        buckets = torch.bucketize(x, torch.tensor(self.boundaries, dtype=x.dtype, device=x.device))
        onehot = F.one_hot(buckets, self.num_buckets).to(torch.float32).flatten(1)
        h = cat
        for _ in range(self.hash_rounds):  # integer mixing hash, then modulo
            h = (h ^ (h >> 16)) * 73244475
            h = h & 0x7FFFFFFF
        idx = torch.remainder(h, self.hash_size)
        # Model: stateful from here.
        d = self.bottom(torch.cat([xn, onehot], dim=1))
        feats: List[Tensor] = [d]
        for i, emb in enumerate(self.embs):
            feats.append(emb(idx[:, i]))
        t = torch.stack(feats, dim=1)
        z = torch.bmm(t, t.transpose(1, 2))
        n = self.num_features
        ij = torch.triu_indices(n, n, 1, device=z.device)
        inter = z.flatten(1).index_select(1, ij[0] * n + ij[1])  # pairwise dot products
        return torch.sigmoid(self.top(torch.cat([d, inter], dim=1)))


def criteo_batch(batch: int, seed: int = 0) -> Tuple[Tensor, Tensor]:
    g = torch.Generator().manual_seed(seed)
    dense = torch.rand(batch, NUM_DENSE, generator=g) * 1000.0 - 5.0
    dense[torch.rand(batch, NUM_DENSE, generator=g) < 0.1] = float("nan")
    cat = torch.randint(0, 2 ** 31 - 1, (batch, NUM_CAT), generator=g, dtype=torch.int64)
    return dense, cat


# ---------------------------------------------------------------- (b) images
def image_pipeline(size: int, batch: int):
    import torchvision
    import torchvision.transforms as T

    transform = nn.Sequential(
        T.ConvertImageDtype(torch.float32),
        T.Resize([size + 8], antialias=False),
        T.CenterCrop(size),
        T.RandomHorizontalFlip(),
        T.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
    )
    g = torch.Generator().manual_seed(1)
    images = torch.randint(0, 256, (batch, 3, size + 16, size + 16), generator=g, dtype=torch.uint8)
    return torch.jit.script(transform), images, torchvision


# ---------------------------------------------------------------- (c) adversarial
class BatchNormDropout(nn.Module):
    """Stateless head, then BatchNorm (buffers), dropout (RNG), linear."""

    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm1d(8)
        self.drop = nn.Dropout(0.5)
        self.fc = nn.Linear(8, 4)

    def forward(self, x: Tensor) -> Tensor:
        x = torch.tanh(x * 2.0 + 1.0)
        return self.fc(self.drop(self.bn(x)))


def _branch(x: Tensor) -> Tensor:
    return torch.sin(x) * 2.0


class Forked(nn.Module):
    """A stateless head, then an asynchronous call (torch.jit.fork/wait)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 3)

    def forward(self, x: Tensor) -> Tensor:
        x = torch.relu(x + 1.0)
        future = torch.jit.fork(_branch, x)
        return self.fc(x + torch.jit.wait(future))


class InPlace(nn.Module):
    """In-place ops on inputs (worker-safe and not) and on parameters/buffers."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)
        self.bias = nn.Parameter(torch.full((6,), 0.25))
        self.register_buffer("calls", torch.zeros(1))

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        x.add_(1.0)  # in place on an input: fine on the worker
        x.mul_(0.5)
        v = x.view(-1, 6)
        out = self.fc(v)
        y.add_(self.bias)  # input mutated with a parameter: trainer
        z = y * 3.0  # reads what the trainer wrote: must stay there too
        self.calls.add_(1.0)  # buffer mutation
        with torch.no_grad():
            self.fc.weight.clamp_(-10.0, 10.0)  # in place on a parameter
        return out + z


class Repeat(nn.Module):
    """Submodule with an int attribute driving a loop."""

    def __init__(self, k: int):
        super().__init__()
        self.k = k
        self.scale = 0.5

    def forward(self, x: Tensor) -> Tensor:
        for i in range(self.k):
            x = x + float(i) * self.scale
        return x


class ControlFlow(nn.Module):
    """Dict inputs, list-append loops, data-dependent if, nested blocks,
    random op in the model, int-attribute submodules, dict output."""

    def __init__(self):
        super().__init__()
        self.rep = Repeat(3)
        self.fc = nn.Linear(16, 3)
        self.gate = nn.Linear(3, 3)

    def forward(self, batch: Dict[str, Tensor]) -> Dict[str, Tensor]:
        x = batch["x"]
        mask = batch["mask"]
        feats: List[Tensor] = []
        for i in range(4):
            feats.append(x * float(i + 1))
        h = torch.cat(feats, dim=1)
        if bool(mask.sum() > 2):  # data dependent, stateless
            h = h * 2.0
        else:
            h = h - 1.0
        n = int(mask.sum().item())
        for j in range(n % 3 + 1):  # loop with nested if, stateless
            if j % 2 == 0:
                h = h * 1.5
            else:
                h = h + 0.5
        h = self.rep(h)
        out = self.fc(h)
        if bool(out.mean() > 0):  # data dependent on a stateful value
            out = self.gate(out)
        noise = torch.rand_like(h).sum(dim=1) * 1e-3  # nondeterministic in the model
        return {"out": out, "h": h.sum(dim=1) + noise}


class ClickLoss(nn.Module):
    """A loss inside the model: binary_cross_entropy_with_logits checks
    target.size() == input.size(), an int[] of a stateless value."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 1)

    def forward(self, x: Tensor, label: Tensor) -> Tensor:
        y = torch.nan_to_num(label, nan=0.0)
        return F.binary_cross_entropy_with_logits(self.fc(torch.log1p(x.abs())).squeeze(1), y)


# ---------------------------------------------------------------- (d) pricing for the trainer
class DCN(nn.Module):
    """Criteo-style Deep & Cross Network: dense features bucketized and
    one-hot encoded, concatenated with the categorical embeddings, then
    cross layers and a linear head. The float one-hot is 4x the bytes of
    the raw features; on a GPU trainer it costs microseconds to make."""

    def __init__(self, buckets: int = 16, hash_size: int = 1000, dim: int = 8, layers: int = 2):
        super().__init__()
        self.buckets = buckets
        self.hash_size = hash_size
        self.boundaries = [0.5 * i for i in range(1, buckets)]
        self.embs = nn.ModuleList([nn.Embedding(hash_size, dim) for _ in range(NUM_CAT)])
        width = NUM_DENSE * buckets + NUM_CAT * dim
        self.cross = nn.ModuleList([nn.Linear(width, 1) for _ in range(layers)])
        self.head = nn.Linear(width, 1)

    def forward(self, dense: Tensor, cat: Tensor) -> Tensor:
        x = torch.log1p(torch.clamp(torch.nan_to_num(dense, nan=0.0), min=0.0))
        b = torch.bucketize(x, torch.tensor(self.boundaries, dtype=x.dtype, device=x.device))
        onehot = F.one_hot(b, self.buckets).to(torch.float32).flatten(1)
        idx = torch.remainder(cat, self.hash_size)
        feats: List[Tensor] = [onehot]
        for i, emb in enumerate(self.embs):
            feats.append(emb(idx[:, i]))
        x0 = torch.cat(feats, dim=1)
        xl = x0
        for layer in self.cross:
            xl = x0 * layer(xl) + xl
        return torch.sigmoid(self.head(xl))


class ImageCNN(nn.Module):
    """uint8 images -> ConvertImageDtype -> Resize -> Normalize -> a small
    CNN: shipped after the resize, the input crosses as float32 crops,
    2.56x the uint8 bytes."""

    def __init__(self, size: int = 32):
        super().__init__()
        import torchvision.transforms as T

        self.pre = nn.Sequential(
            T.ConvertImageDtype(torch.float32),
            T.Resize([size], antialias=False),
            T.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
        )
        self.body = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))

    def forward(self, images: Tensor) -> Tensor:
        return self.body(self.pre(images))


class CheapPrefix(nn.Module):
    """One stateless multiply in front of a large MLP: moving it saves the
    trainer microseconds of milliseconds, which no measurement can tell
    from noise (the never-lose check)."""

    def __init__(self):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(512, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(),
                                 nn.Linear(2048, 1))

    def forward(self, x: Tensor) -> Tensor:
        return self.mlp(x * 0.5)


def save(outdir: str, name: str, module: torch.jit.ScriptModule, example: tuple) -> None:
    module.save(os.path.join(outdir, name + ".pt"))
    torch.save(example, os.path.join(outdir, name + "_example.pt"))


def main() -> int:
    outdir = sys.argv[1]
    bench = "--bench" in sys.argv[2:]
    os.makedirs(outdir, exist_ok=True)
    torch.manual_seed(0)
    if bench:
        save(outdir, "dlrm_bench", torch.jit.script(DLRM()), criteo_batch(4096))
        import torchvision

        save(outdir, "resnet50", torch.jit.script(torchvision.models.resnet50()), (torch.rand(2, 3, 224, 224),))
        return 0
    save(outdir, "dlrm", torch.jit.script(DLRM()), criteo_batch(64))
    transform, images, torchvision = image_pipeline(32, 4)
    transform.save(os.path.join(outdir, "image_transform.pt"))
    save(outdir, "resnet18", torch.jit.script(torchvision.models.resnet18(num_classes=10)), (images,))
    save(outdir, "bn_dropout", torch.jit.script(BatchNormDropout()), (torch.randn(16, 8),))
    save(outdir, "inplace", torch.jit.script(InPlace()), (torch.randn(4, 6), torch.randn(4, 6)))
    save(outdir, "forked", torch.jit.script(Forked()), (torch.randn(4, 6),))
    save(outdir, "click_loss", torch.jit.script(ClickLoss()), (torch.randn(16, 8), torch.rand(16).round()))
    save(outdir, "dcn", torch.jit.script(DCN()), criteo_batch(64))
    g = torch.Generator().manual_seed(2)
    save(outdir, "image_cnn", torch.jit.script(ImageCNN()),
         (torch.randint(0, 256, (16, 3, 40, 40), generator=g, dtype=torch.uint8),))
    save(outdir, "cheap_prefix", torch.jit.script(CheapPrefix()), (torch.randn(256, 512, generator=g),))
    mask = torch.tensor([1.0, 1.0, 1.0, 0.0])
    save(outdir, "control", torch.jit.script(ControlFlow()), ({"x": torch.randn(4, 4), "mask": mask},))
    # Bad inputs.
    dense, cat = criteo_batch(8)
    torch.save((dense, cat.to(torch.float32)), os.path.join(outdir, "dlrm_example_float.pt"))
    torch.save((dense,), os.path.join(outdir, "dlrm_example_arity.pt"))
    torch.save((dense, cat), os.path.join(outdir, "not_script.pt"))
    with open(os.path.join(outdir, "garbage.pt"), "wb") as f:
        f.write(b"this is not a TorchScript archive\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
