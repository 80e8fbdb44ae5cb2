"""The models and the JPEG Dataset of bench/device/e2e_train.py (plain torch,
no torchvision needed):

  DLRM        embedding tables (one per Criteo categorical column, sized by
              criteo.pt's per-column moduli + 1), a bottom MLP on the dense
              features (criteo.pt's log1p'd dense + its one-hot columns), the
              pairwise dot products of the embeddings and the bottom output,
              a top MLP to one logit; BCE loss on criteo.pt's label.
  ResNet      ResNet-50's layout (7x7 stem, bottleneck blocks [3, 4, 6, 3] of
              base width 64, expansion 4, 1000 classes) with the width and the
              blocks per stage as parameters, so the CPU stand-in can be small.
  JpegCrops   the DataLoader side's images: decode to RGB (torchvision.io
              where importable, else PIL), a RandomResizedCrop box (scale
              0.08-1, ratio 3/4-4/3, as torchvision's get_params draws it),
              then jpeg.pt's one() (bilinear resize to 224x224, normalize):
              the work goldminer's reader does with resized-crop:224 plus
              jpeg.pt's normalizing.
"""
import math
import os
import random

import torch
from torch import nn

# criteo.pt's table sizes (make_programs.py CriteoPrep.mods): ids are 0..mod.
CRITEO_MODS = [1000, 100000, 50000, 10000, 300, 30, 10000, 600, 4, 50000, 5000, 100000, 3000, 30, 10000, 100000,
               10, 5000, 2000, 4, 100000, 20, 20, 50000, 100, 40000]
CRITEO_DENSE = 13 + 3 * 16  # log1p'd dense + one-hot of 3 columns x 16


def _mlp(sizes, last_relu=True):
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2 or last_relu:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class DLRM(nn.Module):
    def __init__(self, dim=16, bottom=(512, 256, 64), top=(512, 256)):
        super().__init__()
        # sparse gradients: SGD updates only the rows a batch looked up.
        self.tables = nn.ModuleList(nn.Embedding(m + 1, dim, sparse=True) for m in CRITEO_MODS)
        self.bottom = _mlp([CRITEO_DENSE, *bottom, dim])
        n = len(CRITEO_MODS) + 1
        self.register_buffer("pairs", torch.triu_indices(n, n, offset=1), persistent=False)  # moves with .to()
        self.top = _mlp([dim + n * (n - 1) // 2, *top, 1], last_relu=False)

    def forward(self, dense, sparse):
        x = self.bottom(dense)
        vectors = torch.stack([x] + [t(sparse[:, i]) for i, t in enumerate(self.tables)], dim=1)  # [B, 27, dim]
        dots = torch.bmm(vectors, vectors.transpose(1, 2))[:, self.pairs[0], self.pairs[1]]
        return self.top(torch.cat([x, dots], dim=1)).squeeze(1)

    def loss(self, batch):
        label, dense, _buckets, sparse, onehot = batch
        logits = self(torch.cat([dense, onehot], dim=1), sparse)
        return nn.functional.binary_cross_entropy_with_logits(logits, label)


class Bottleneck(nn.Module):
    def __init__(self, cin, width, stride):
        super().__init__()
        cout = width * 4
        self.body = nn.Sequential(
            nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
            nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
            nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.skip = None
        if stride != 1 or cin != cout:
            self.skip = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        return torch.relu(self.body(x) + (x if self.skip is None else self.skip(x)))


class ResNet(nn.Module):
    def __init__(self, width=64, depth=(3, 4, 6, 3), classes=1000):
        super().__init__()
        layers = [nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
                  nn.MaxPool2d(3, 2, 1)]
        cin = width
        for stage, blocks in enumerate(depth):
            w = width * 2 ** stage
            for b in range(blocks):
                layers.append(Bottleneck(cin, w, 2 if b == 0 and stage > 0 else 1))
                cin = w * 4
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(self.features(x), 1), 1))

    def loss(self, batch):
        (images,) = batch
        # No labels in the folder: fixed pseudo-labels (the cost does not
        # depend on their values).
        labels = torch.arange(images.shape[0], device=images.device) % self.fc.out_features
        return nn.functional.cross_entropy(self(images), labels)


def jpeg_decoder():
    """("torchvision" | "PIL", None) where one can decode, else (None, why)."""
    try:
        import torchvision.io  # noqa: F401
        return "torchvision", None
    except Exception as e:  # ImportError, or a torchvision built for another torch
        why = f"torchvision: {e}"
    try:
        import PIL.Image  # noqa: F401
        return "PIL", None
    except Exception as e:
        return None, f"{why}; PIL: {e}"


def jpeg_files(folder):
    return sorted(os.path.join(d, f) for d, _, fs in os.walk(folder) for f in fs
                  if f.lower().endswith((".jpg", ".jpeg")))


def crop_box(height, width, rng):
    """A RandomResizedCrop box (top, left, h, w): torchvision's get_params."""
    area = height * width
    for _ in range(10):
        target = area * rng.uniform(0.08, 1.0)
        aspect = math.exp(rng.uniform(math.log(3 / 4), math.log(4 / 3)))
        w, h = int(round(math.sqrt(target * aspect))), int(round(math.sqrt(target / aspect)))
        if 0 < w <= width and 0 < h <= height:
            return rng.randint(0, height - h), rng.randint(0, width - w), h, w
    ratio = width / height  # fallback: the central crop
    if ratio < 3 / 4:
        w, h = width, int(round(width / (3 / 4)))
    elif ratio > 4 / 3:
        h, w = height, int(round(height * (4 / 3)))
    else:
        w, h = width, height
    return (height - h) // 2, (width - w) // 2, h, w


class JpegCrops(torch.utils.data.Dataset):
    def __init__(self, files, program_path, decoder, seed=0):
        self.files, self.program_path, self.decoder, self.seed = files, program_path, decoder, seed
        self.program, self.rng = None, None

    def __len__(self):
        return len(self.files)

    def _decode(self, path):
        if self.decoder == "torchvision":
            from torchvision.io import ImageReadMode, decode_jpeg
            with open(path, "rb") as f:
                raw = f.read()
            try:
                return decode_jpeg(torch.frombuffer(bytearray(raw), dtype=torch.uint8),
                                   mode=ImageReadMode.RGB).permute(1, 2, 0)
            except RuntimeError:  # e.g. CMYK: PIL converts it, where present
                pass
        from PIL import Image
        with Image.open(path) as image:
            rgb = image.convert("RGB")
            return torch.frombuffer(bytearray(rgb.tobytes()), dtype=torch.uint8).view(rgb.height, rgb.width, 3)

    def __getitem__(self, i):
        if self.program is None:
            self.program = torch.jit.load(self.program_path)
            info = torch.utils.data.get_worker_info()
            self.rng = random.Random(self.seed * 1000 + (info.id if info else 0))
        image = self._decode(self.files[i])
        top, left, h, w = crop_box(image.shape[0], image.shape[1], self.rng)
        with torch.no_grad():
            return (self.program.one(image[top:top + h, left:left + w].contiguous()),)
