"""Progress of long work on stderr: tqdm's bar on a terminal, else a log line now and then (tqdm's meter text).

stdout is left alone, so ``translate.py`` output stays translations only.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterable, Iterator
from types import TracebackType
from typing import TypeVar

from tqdm import tqdm

log = logging.getLogger(__name__)
T = TypeVar("T")


class Progress:
    """``total`` units of work (bytes read, sentences translated); ``count`` counts the ``items`` they hold (pairs),
    shown as items/s when ``items`` is given. ``every``: seconds between log lines when stderr is not a terminal;
    ``enabled=False``: silent."""

    def __init__(
        self,
        total: float,
        desc: str,
        *,
        unit: str = "B",
        items: str | None = "pairs",
        every: float = 30.0,
        enabled: bool = True,
    ):
        self.total, self.desc, self.unit, self.items, self.every = total, desc, unit, items, every
        self.enabled = enabled
        self.n = self.count = 0
        self.start = self.logged = time.monotonic()
        self.bar = None  # tqdm's bar on a terminal; elsewhere log lines
        if enabled and sys.stderr.isatty():
            self.bar = tqdm(total=total, desc=desc, unit=unit, unit_scale=self.scaled, unit_divisor=1024, leave=False)

    @property
    def scaled(self) -> bool:
        return self.unit == "B"  # bytes as KB, MB, GB; counts as they are

    def update(self, n: float, count: int = 0) -> None:
        self.n += n
        self.count += count
        if self.bar is not None:
            if self.items:
                self.bar.set_postfix_str(self.rate(), refresh=False)
            self.bar.update(n)
        elif self.enabled and time.monotonic() - self.logged >= self.every:
            self.logged = time.monotonic()
            log.info("%s", self.meter())

    def iterate(self, items: Iterable[T], every: int = 1000) -> Iterator[T]:
        """``items``, counted as one unit each (``every`` at a time) as they are taken."""
        n = 0
        for n, item in enumerate(items, 1):
            yield item
            if n % every == 0:
                self.update(every)
        self.update(n % every)

    def rate(self) -> str:
        return f"{self.count / max(time.monotonic() - self.start, 1e-9):,.0f} {self.items}/s"

    def meter(self) -> str:
        """tqdm's text for the work so far (share done, amount, elapsed and remaining time, rate), and items/s."""
        elapsed = time.monotonic() - self.start
        scale = dict(unit=self.unit, unit_scale=self.scaled, unit_divisor=1024, ncols=0)
        text = tqdm.format_meter(self.n, self.total, elapsed, prefix=self.desc, **scale).strip()
        return f"{text}, {self.rate()}" if self.items else text

    def close(self) -> None:
        """End the bar; the whole work's line is logged (terminal or not)."""
        if self.bar is not None:
            self.bar.close()
        if self.enabled:
            log.info("%s", self.meter())

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, kind: type | None, error: BaseException | None, tb: TracebackType | None) -> None:
        if kind is None:
            self.close()
        elif self.bar is not None:  # interrupted: no closing line
            self.bar.close()
