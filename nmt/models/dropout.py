"""Dropout whose masks are cheap on a CPU.

``nn.Dropout`` on a CPU draws one Bernoulli number per element from a Mersenne twister; on the Transformer's training
step that is 17% of the time in float32 and 29% under bf16 autocast (``bench/speed/profile_step.py``). Here the mask
comes from 16 random bits per element, four elements from each 64-bit draw of the same generator (so
``torch.manual_seed`` and Lightning's seeding make it reproducible), about 3x faster. The drop probability is
rounded to a multiple of 1/65,536 and the kept elements are scaled by the inverse of the rounded keep probability,
so the expectation is exactly preserved. On a GPU it is ``nn.Dropout``.

Inside ``torch.compile`` the draw is one opaque operator (``nmt::keep_bytes``) and the rest is fused around it.
Left to itself, Inductor turns a CPU's dropout into random numbers of its own computed element by element in its
kernels, which made the compiled Transformer step slower than the eager one (``bench/speed/train_speed.py --compile``);
this way a compiled step draws the same masks as the eager step from the same generator, so the two train alike.
The masks are bytes, not booleans: Inductor's CPU kernels store and load booleans through slow generic vector code;
for the same reason ReLU followed by dropout (``Dropout.after_relu``) keeps only its output for the backward pass.
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


def _keep_bytes(shape: torch.Size, dropped: int) -> Tensor:
    """uint8 ones where an element of ``shape`` is kept, zeros where it is one of the ``dropped`` levels in 65,536.
    Bytes, not booleans: Inductor's CPU kernels store and load a boolean tensor through generic vector code many
    times slower than a byte's (``bench/speed/compiled_masks.py``)."""
    return (random_levels(shape) >= dropped - LEVELS // 2).view(torch.uint8)


@torch.library.custom_op("nmt::keep_bytes", mutates_args=("draws",))
def _keep_bytes_op(draws: Tensor, like: Tensor, dropped: int) -> Tensor:
    """``_keep_bytes`` of ``like``'s shape as one opaque operator inside ``torch.compile``, where Inductor would
    otherwise lower a CPU's random numbers to its own, computed element by element in its kernels."""
    draws.add_(1)
    return _keep_bytes(like.shape, dropped)


@_keep_bytes_op.register_fake
def _(draws: Tensor, like: Tensor, dropped: int) -> Tensor:
    return like.new_empty(like.shape, dtype=torch.uint8)


def keep_mask(x: Tensor, p: float) -> tuple[Tensor, float]:
    """A uint8 mask of ``x``'s shape, 1 where an element is kept, with probability ``1 - q``, and that ``q``, the
    drop probability ``p`` rounded to a multiple of 1/65,536. The same numbers compiled and eager."""
    dropped = round(p * LEVELS)
    keep = _keep_bytes_op(_DRAWS, x, dropped) if torch.compiler.is_compiling() else _keep_bytes(x.shape, dropped)
    return keep, dropped / LEVELS


@torch.library.custom_op("nmt::relu_dropped_grad", mutates_args=())
def _relu_dropped_grad(grad: Tensor, y: Tensor, scale: float) -> Tensor:
    """The gradient of ``y = relu(x) * keep * scale`` from ``y`` alone: ``grad * scale`` where ``y > 0``, else 0. One
    opaque operator inside ``torch.compile``, so that the compiler keeps ``y`` (which the next layer keeps anyway) for
    it instead of computing a boolean mask in the forward pass to keep beside it."""
    return torch.ops.aten.threshold_backward(grad, y, 0).mul_(scale)


@_relu_dropped_grad.register_fake
def _(grad: Tensor, y: Tensor, scale: float) -> Tensor:
    return torch.empty_like(grad)


class _ReLUDropped(torch.autograd.Function):
    """``relu(x) * keep * scale`` that keeps only its output for the backward pass: the gradient passes, scaled,
    where the output is positive (``x`` positive and kept). Autograd alone would keep ReLU's output and the mask
    (compiled: a boolean ``x <= 0``) beside the output that the next layer keeps anyway."""

    @staticmethod
    def forward(ctx, x: Tensor, keep: Tensor, scale: float) -> Tensor:
        y = torch.relu(x).mul_(keep).mul_(scale)
        ctx.save_for_backward(y)
        ctx.scale = scale
        return y

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None, None]:
        (y,) = ctx.saved_tensors
        return _relu_dropped_grad(grad, y, ctx.scale), None, None


class Dropout(nn.Dropout):
    """``nn.Dropout`` with its masks drawn 16 bits an element on a CPU (see the module's docstring)."""

    def draws_masks(self, x: Tensor) -> bool:
        """Whether it drops elements of ``x`` with masks of its own (training on a CPU, ``p`` not rounding to 0 or 1);
        otherwise it is ``nn.Dropout``'s."""
        return self.training and x.device.type == "cpu" and 0 < round(self.p * LEVELS) < LEVELS

    def forward(self, x: Tensor) -> Tensor:
        if not self.draws_masks(x):
            return super().forward(x)
        keep, q = keep_mask(x, self.p)
        return x * keep * (1.0 / (1.0 - q))  # in x's dtype: bf16 stays bf16 under autocast

    def after_relu(self, x: Tensor) -> Tensor:
        """``self(relu(x))``, keeping only the output for the backward pass where it draws masks of its own."""
        if not self.draws_masks(x):
            return super().forward(torch.relu(x))
        keep, q = keep_mask(x, self.p)
        return _ReLUDropped.apply(x, keep, 1.0 / (1.0 - q))
