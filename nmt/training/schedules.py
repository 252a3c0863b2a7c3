"""Learning-rate schedules that torch does not have under a name (``conf/schedule/``)."""

from __future__ import annotations

import math

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR


def inverse_sqrt(optimizer: Optimizer, warmup_steps: int) -> LambdaLR:
    """Linear warm-up over ``warmup_steps`` updates, then decay with the inverse square root of the step."""
    warmup = max(1, warmup_steps)
    return LambdaLR(optimizer, lambda step: min((step + 1) / warmup, math.sqrt(warmup / (step + 1))))
