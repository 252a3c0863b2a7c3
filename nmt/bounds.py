"""The allowed values of a setting or an option: an interval of numbers (:class:`Range`) or words (:class:`Choice`),
and the named intervals the project's settings share.

A range is written once, where the value is taken: on the argument of the ``_target_`` or type that takes it, as
``Annotated[int, SIZE]`` (read by :func:`nmt.arguments.value_bounds`), or, for another library's argument, in
:data:`nmt.settings.RANGES`; a command's option reads the same record.
"""

from __future__ import annotations

import math
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

UNIONS = (typing.Union, types.UnionType)  # what a hint's union is, as typing.get_origin tells it


def _number(x: float) -> str:
    """A bound as a reader types it: whole numbers in full (2,147,483,647, not 2.14748e+09)."""
    return f"{int(x):,}" if math.isfinite(x) and x == int(x) and abs(x) < 1e15 else f"{x:g}"


@dataclass(frozen=True)
class Range:
    """An interval, closed unless ``lo_open``/``hi_open``; ``integer`` asks for whole numbers; ``null`` allows None;
    ``items``: a list of such numbers (``optim.betas``), and only then a list."""

    lo: float = -math.inf
    hi: float = math.inf
    lo_open: bool = False
    hi_open: bool = False
    integer: bool = False
    null: bool = False
    items: bool = False

    def __str__(self) -> str:
        kind = ("a list of integers" if self.integer else "a list of numbers") if self.items else \
            "an integer" if self.integer else "a number"  # fmt: skip
        lo, hi = _number(self.lo), _number(self.hi)
        if self.lo == -math.inf and self.hi == math.inf:
            text = kind
        elif self.hi == math.inf:
            text = f"{kind} {'>' if self.lo_open else '>='} {lo}"
        else:
            text = f"{kind} in {'(' if self.lo_open else '['}{lo}, {hi}{')' if self.hi_open else ']'}"
        return text + (" (or null)" if self.null else "")

    def ok(self, value: Any) -> bool:
        if value is None:
            return self.null
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return False  # inf and nan too: no key here means "no limit" by an infinite value
        if self.integer and value != int(value):
            return False
        above = value > self.lo if self.lo_open else value >= self.lo
        below = value < self.hi if self.hi_open else value <= self.hi
        return above and below

    def check(self, name: str, value: Any) -> None:
        """Raise ``ValueError("name=value: must be <range>")`` if ``value`` (each item, of a list) is outside."""
        if self.items != isinstance(value, (list, tuple)) and not (value is None and self.null):
            raise ValueError(f"{name}={value!r}: must be {self}")
        for v in value if self.items and value is not None else [value]:
            if not self.ok(v):
                raise ValueError(f"{name}={value!r}: must be {self}")


# Counts no run comes near (a step a millisecond for 24 days); beyond them the 32-bit integers of numpy, sentencepiece
# and torch's data loading overflow. The bound of every count with no smaller one of its own.
INT32 = 2**31 - 1
POSITIVE = Range(1, integer=True)  # for options with bounds of their own (translate.py, serve.py)
COUNT = Range(0, integer=True)
BIG = Range(1, INT32, integer=True)  # a count of the config: at least 1 ...
BIG0 = Range(0, INT32, integer=True)  # ... or at least 0
FRACTION = Range(0, 1, hi_open=True)  # dropout, label smoothing, held-out shares
SEED = Range(0, 2**32 - 1, integer=True)  # numpy's and Lightning's seeds are unsigned 32-bit integers
# A layer's width: the widest models trained anywhere have a few thousand units; beyond 65,536 a typo (a digit or two
# too many) would try to allocate gigabytes per layer before failing.
SIZE = Range(1, 65536, integer=True)
LAYERS = Range(1, 256, integer=True)  # stacked layers: the deepest NMT stacks have tens; beyond, a typo
HEADS = Range(1, 1024, integer=True)  # attention heads (each must also divide its layer's size)
POSITIONS = Range(1, 65536, integer=True)  # learned positions: a table row each, for the longest input or output
TOKENS = Range(1, 2**20, integer=True)  # padded tokens per batch: 2**20 is 8x the largest GPU batches in use
STEPS = Range(-1, INT32, integer=True)  # a number of updates or epochs, -1: no limit
WEIGHT = Range(0)  # a loss weight or decay: no bound but a finite value (inf and nan are refused everywhere)


@dataclass(frozen=True)
class Choice:
    """One of ``words``; ``null`` allows None; ``file``: or an existing file, so named; ``items``: a list of them
    (``kernels.attention``), and only then a list."""

    words: tuple[str, ...]
    null: bool = False
    file: str = ""
    items: bool = False

    def __str__(self) -> str:
        text = f"one of {', '.join(self.words)}" if len(self.words) > 1 else self.words[0]
        text = f"a list of {text.removeprefix('one of ')}" if self.items else text
        return text + (f", or {self.file}" if self.file else "") + (" (or null)" if self.null else "")

    def ok(self, value: Any) -> bool:
        if value is None:
            return self.null
        words, file = isinstance(value, str) and value in self.words, bool(self.file) and isinstance(value, str)
        return words or file and Path(value).expanduser().is_file()

    def check(self, name: str, value: Any) -> None:
        """Raise ``ValueError("name=value: must be one of <words>")`` (a missing file named so) unless allowed."""
        if self.items != isinstance(value, (list, tuple)) and not (value is None and self.null):
            raise ValueError(f"{name}={value!r}: must be {self}")
        for v in value if self.items and value is not None else [value]:
            if not self.ok(v):
                missing = " (no such file)" if self.file and isinstance(v, str) and ("/" in v or "." in v) else ""
                raise ValueError(f"{name}={value!r}{missing}: must be {self}")


def bound_of(hint: Any) -> Range | Choice | None:
    """The bound a hint carries, ``Annotated[int, SIZE]`` or ``Annotated[int, SIZE] | None``; None where it has none."""
    kinds = typing.get_args(hint) if typing.get_origin(hint) in UNIONS else (hint,)
    marks = [m for k in kinds for m in getattr(k, "__metadata__", ())]
    return next((m for m in marks if isinstance(m, (Range, Choice))), None)


def check_fields(obj: Any, prefix: str) -> None:
    """Check each field of a dataclass ``obj`` annotated ``Annotated[T, bound]`` against its bound, named
    ``prefix + field`` (``data.join.``): a dataclass built outside a config meets the bounds its config does."""
    import dataclasses

    hints = typing.get_type_hints(type(obj), include_extras=True)
    for f in dataclasses.fields(obj):
        if (bound := bound_of(hints[f.name])) is not None and getattr(obj, f.name) is not None:
            bound.check(prefix + f.name, getattr(obj, f.name))
