"""Dropout whose masks are cheap on a CPU.

``nn.Dropout`` on a CPU draws one Bernoulli number per element from a Mersenne twister; on the Transformer's training
step that is 17% of the time in float32 and 29% under bf16 autocast (``bench/profile_step.py``). Here the mask
comes from 16 random bits per element, four elements from each 64-bit draw of the same generator (so
``torch.manual_seed`` and Lightning's seeding make it reproducible), about 3x faster. The drop probability is
rounded to a multiple of 1/65,536 and the kept elements are scaled by the inverse of the rounded keep probability,
so the expectation is exactly preserved. On a GPU, and inside ``torch.compile`` (whose random numbers are fused into
its kernels), it is ``nn.Dropout``.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

LEVELS = 1 << 16  # the resolution of the drop probability


def keep_mask(shape: torch.Size, p: float) -> tuple[Tensor, float]:
    """A boolean mask of ``shape`` that keeps each element with probability ``1 - q`` and that ``q``, the drop
    probability ``p`` rounded to a multiple of 1/65,536."""
    n, dropped = shape.numel(), round(p * LEVELS)
    bits = torch.randint(-(1 << 63), (1 << 63) - 1, ((n + 3) // 4,), dtype=torch.int64)  # 4 x 16 bits each
    levels = bits.view(torch.int16)[:n].view(shape)  # uniform over -32,768 .. 32,767
    return levels >= dropped - LEVELS // 2, dropped / LEVELS


class Dropout(nn.Dropout):
    """``nn.Dropout`` with its masks drawn 16 bits an element on a CPU (see the module's docstring)."""

    def forward(self, x: Tensor) -> Tensor:
        cpu = x.device.type == "cpu" and not torch.compiler.is_compiling()
        if not self.training or not cpu or not 0 < round(self.p * LEVELS) < LEVELS:  # p rounding to 0 or 1 too
            return super().forward(x)
        mask, q = keep_mask(x.shape, self.p)
        return x * mask * (1.0 / (1.0 - q))  # in x's dtype: bf16 stays bf16 under autocast
