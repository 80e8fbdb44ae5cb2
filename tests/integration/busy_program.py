#!/usr/bin/env python3
"""Writes a TorchScript worker program for the `text` reader's batches
(data uint8 [sum of lengths], lengths int64 [B]) that costs real CPU time:
ROUNDS products of 96x96 matrices per batch, then the batch unchanged. The
ctld tests use it so that data workers, not the trainer, bound a job.

usage: busy_program.py OUT.pt [ROUNDS]
"""
import sys
from typing import Tuple

import torch


class Busy(torch.nn.Module):
    def __init__(self, rounds: int):
        super().__init__()
        self.rounds = rounds
        self.register_buffer("w", torch.full((96, 96), 1.0 / 96))

    def forward(self, data: torch.Tensor, lengths: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        x = self.w
        for _ in range(self.rounds):
            x = torch.tanh(x @ self.w + 0.5)
        # Depends on x, so nothing is optimised away; adds 0 to every length.
        return data, lengths + (x.sum() * 0).to(torch.int64)


if __name__ == "__main__":
    torch.jit.save(torch.jit.script(Busy(int(sys.argv[2]) if len(sys.argv) > 2 else 200)), sys.argv[1])
