"""What preparation does to every pair: the ``data.prepare`` settings the streaming passes need."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Rules:
    """What preparation does to every pair (the ``conf/data`` settings it needs)."""

    on_bad_line: str
    valid: float  # held-out shares of hash-split inputs
    test: float
    max_len: int
    max_ratio: float
    ratio_min_len: int
    sample: int  # training pairs drawn for sentencepiece
    seed: int
    reverse: bool = False  # pairs turned round after the split (English to French): the same pairs are held out
