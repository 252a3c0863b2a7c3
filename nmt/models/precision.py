"""Mixed precision where a model's own numbers need more than bfloat16: recurrent states.

Under autocast (``trainer.precision=bf16-mixed``) products run in bfloat16, whose 8-bit mantissa is plenty for one
product but not for a state carried through every step of a recurrence: rounded to bfloat16 at each of 50 steps, a
GRU state drifts. So a recurrence keeps its state in float32 (its products may still run in bfloat16), and a cuDNN
GRU, which would carry its state in the input's dtype, runs in float32 (TF32 tensor cores on a GPU).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import Tensor


def state(x: Tensor) -> Tensor:
    """``x`` as a recurrent state: float32 under autocast, as it is otherwise."""
    return x.float() if torch.is_autocast_enabled(x.device.type) else x


@contextlib.contextmanager
def full_precision(x: Tensor) -> Iterator[None]:
    """Autocast off, on ``x``'s device, within the block (its inputs made float32 with :func:`state` before it)."""
    with torch.autocast(x.device.type, enabled=False):
        yield
