"""Dropout whose masks are cheap on a CPU.

``nn.Dropout`` on a CPU draws one Bernoulli number per element from a Mersenne twister; on the Transformer's training
step that is 17% of the time in float32 and 29% under bf16 autocast (``bench/profile_step.py``). Here the mask
comes from 16 random bits per element, four elements from each 64-bit draw of the same generator (so
``torch.manual_seed`` and Lightning's seeding make it reproducible), about 3x faster. The drop probability is
rounded to a multiple of 1/65,536 and the kept elements are scaled by the inverse of the rounded keep probability,
so the expectation is exactly preserved. On a GPU it is ``nn.Dropout``.

Inside ``torch.compile`` the draw is one opaque operator (``nmt::random_levels``) and the rest is fused around it.
Left to itself, Inductor turns a CPU's dropout into random numbers of its own computed element by element in its
kernels, which made the compiled Transformer step slower than the eager one (``bench/train_speed.py --compile``);
this way a compiled step draws the same masks as the eager step from the same generator, so the two train alike.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

LEVELS = 1 << 16  # the resolution of the drop probability


def random_levels(shape: torch.Size) -> Tensor:
    """int16 numbers of ``shape``, uniform over -32,768 .. 32,767: four from each 64-bit draw."""
    n = shape.numel()
    bits = torch.randint(-(1 << 63), (1 << 63) - 1, ((n + 3) // 4,), dtype=torch.int64)  # 4 x 16 bits each
    return bits.view(torch.int16)[:n].view(shape)


# Counts the draws made inside compiled graphs. Each draw writes it, so a compiler keeps every draw (two draws of
# one shape are not one to it) and keeps them in the order of the eager program, which makes the masks the same.
_DRAWS = torch.zeros((), dtype=torch.int64)


@torch.library.custom_op("nmt::random_levels", mutates_args=("draws",))
def _random_levels_op(draws: Tensor, like: Tensor) -> Tensor:
    """``random_levels`` of ``like``'s shape as one opaque operator inside ``torch.compile``, where Inductor would
    otherwise lower a CPU's random numbers to its own, computed element by element in its kernels."""
    draws.add_(1)
    return random_levels(like.shape)


@_random_levels_op.register_fake
def _(draws: Tensor, like: Tensor) -> Tensor:
    return like.new_empty(like.shape, dtype=torch.int16)


def keep_mask(x: Tensor, p: float) -> tuple[Tensor, float]:
    """A boolean mask of ``x``'s shape that keeps each element with probability ``1 - q`` and that ``q``, the drop
    probability ``p`` rounded to a multiple of 1/65,536. The same numbers compiled and eager."""
    dropped = round(p * LEVELS)
    levels = _random_levels_op(_DRAWS, x) if torch.compiler.is_compiling() else random_levels(x.shape)
    return levels >= dropped - LEVELS // 2, dropped / LEVELS


class Dropout(nn.Dropout):
    """``nn.Dropout`` with its masks drawn 16 bits an element on a CPU (see the module's docstring)."""

    def draws_masks(self, x: Tensor) -> bool:
        """Whether it drops elements of ``x`` with masks of its own (training on a CPU, ``p`` not rounding to 0 or 1);
        otherwise it is ``nn.Dropout``'s."""
        return self.training and x.device.type == "cpu" and 0 < round(self.p * LEVELS) < LEVELS

    def forward(self, x: Tensor) -> Tensor:
        if not self.draws_masks(x):
            return super().forward(x)
        mask, q = keep_mask(x, self.p)
        return x * mask * (1.0 / (1.0 - q))  # in x's dtype: bf16 stays bf16 under autocast
