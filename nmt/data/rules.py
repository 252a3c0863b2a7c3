"""What preparation does to every pair: the ``data.prepare`` settings the streaming passes need."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from nmt.bounds import BIG, FRACTION


@dataclass(frozen=True)
class Rules:
    """What preparation does to every pair (the ``conf/data`` settings it needs)."""

    on_bad_line: str
    valid: Annotated[float, FRACTION]  # held-out shares of hash-split inputs
    test: Annotated[float, FRACTION]
    max_len: int
    max_ratio: float
    ratio_min_len: int
    sample: Annotated[int, BIG]  # training pairs drawn for sentencepiece
    seed: int
    reverse: bool = False  # pairs turned round after the split (English to French): the same pairs are held out
