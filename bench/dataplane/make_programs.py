#!/usr/bin/env python3
"""Scripts the worker programs of the data-plane benchmarks with TorchScript
(torch.jit.save), so that goldminer-dw, bench/inprocess_bench and the
PyTorch DataLoader baseline (dataloader_compare.py) run the very same code.

  criteo.pt  DLRM-style preprocessing of a criteo-tsv batch
             (label [B], dense float32 [B,13] NaN = missing, sparse int64
             [B,26] -1 = missing; readers/README.md):
             label NaN -> 0; dense: NaN -> 0, clamp at 0, log1p, and a
             bucketized copy (16 log-spaced boundaries); sparse: hash modulo a
             per-column table size (+1, missing -> 0); one-hot of 3 low-
             cardinality columns. Returns (label, dense, buckets, sparse, onehot).
  jpeg.pt    per image: uint8 HWC -> float CHW, bilinear resize to 224x224,
             ImageNet mean/std normalization; input is the jpeg reader's
             packed batch (data uint8 [sum H*W*3], shapes int64 [B,3]);
             returns float32 [B,3,224,224]. A batch whose images are all
             224x224 already (--jpeg-decode resized-crop:224) is normalized
             without the resize (to the same size it is the identity).
  The module `jpeg.pt` also exposes `one(image)` (one HWC uint8 image), which
  the DataLoader baseline calls per sample.

usage: make_programs.py OUTDIR
"""
import os
import sys
from typing import List, Tuple

import torch
import torch.nn.functional as F


class CriteoPrep(torch.nn.Module):
    def __init__(self):
        super().__init__()
        # Table sizes per categorical column (DLRM's --max-ind-range style).
        self.register_buffer("mods", torch.tensor([1000, 100000, 50000, 10000, 300, 30, 10000, 600, 4, 50000,
                                                   5000, 100000, 3000, 30, 10000, 100000, 10, 5000, 2000, 4,
                                                   100000, 20, 20, 50000, 100, 40000], dtype=torch.int64))
        self.register_buffer("boundaries", torch.logspace(-1.0, 1.2, 16))
        self.onehot_cols: List[int] = [8, 16, 19]
        self.onehot_width = 16

    def forward(self, label: torch.Tensor, dense: torch.Tensor,
                sparse: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        y = torch.nan_to_num(label, nan=0.0)
        d = torch.log1p(torch.clamp(torch.nan_to_num(dense, nan=0.0), min=0.0))
        buckets = torch.bucketize(d, self.boundaries)
        s = torch.where(sparse >= 0, torch.remainder(sparse, self.mods) + 1, torch.zeros_like(sparse))
        cols = s[:, self.onehot_cols]
        onehot = F.one_hot(torch.remainder(cols, self.onehot_width), self.onehot_width).flatten(1).to(torch.float32)
        return y, d, buckets, s, onehot


class JpegPrep(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1))
        self.register_buffer("std", torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1))

    @torch.jit.export
    def one(self, image: torch.Tensor) -> torch.Tensor:
        x = image.permute(2, 0, 1).unsqueeze(0).to(torch.float32).div_(255.0)
        x = F.interpolate(x, size=[224, 224], mode="bilinear", align_corners=False)
        return (x.squeeze(0) - self.mean) / self.std

    def forward(self, data: torch.Tensor, shapes: torch.Tensor) -> torch.Tensor:
        b = shapes.size(0)
        if b > 0 and bool((shapes[:, 0] == 224).all()) and bool((shapes[:, 1] == 224).all()):
            # one()'s arithmetic, in place in each image's slice of the
            # output (a pass over 600 KB stays in cache; whole-batch
            # temporaries measured 3.6x slower).
            images = data.view(b, 224, 224, 3).permute(0, 3, 1, 2)
            out = torch.empty([b, 3, 224, 224], dtype=torch.float32)
            for i in range(b):
                x = out[i]
                x.copy_(images[i])
                x.div_(255.0).sub_(self.mean).div_(self.std)
            return out
        out: List[torch.Tensor] = []
        offset = 0
        for i in range(shapes.size(0)):
            h = int(shapes[i, 0])
            w = int(shapes[i, 1])
            n = h * w * 3
            out.append(self.one(data[offset:offset + n].view(h, w, 3)))
            offset += n
        return torch.stack(out)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    os.makedirs(sys.argv[1], exist_ok=True)
    torch.jit.save(torch.jit.script(CriteoPrep()), os.path.join(sys.argv[1], "criteo.pt"))
    torch.jit.save(torch.jit.script(JpegPrep()), os.path.join(sys.argv[1], "jpeg.pt"))


if __name__ == "__main__":
    main()
