"""Progress of long work on stderr: tqdm's bar on a terminal, else a log line now and then (tqdm's meter text).

stdout is left alone, so ``translate.py`` output stays translations only.
"""

from __future__ import annotations

import logging
import sys
import time
from types import TracebackType

from tqdm import tqdm

log = logging.getLogger(__name__)


class Progress:
    """``total`` units of work (bytes read, lines translated); ``count`` counts the items they hold (pairs, lines),
    shown as items/s. ``every``: seconds between log lines when stderr is not a terminal; ``enabled=False``: silent."""

    def __init__(
        self,
        total: float,
        desc: str,
        *,
        unit: str = "B",
        items: str = "pairs",
        every: float = 30.0,
        enabled: bool = True,
    ):
        self.total, self.desc, self.unit, self.items, self.every = total, desc, unit, items, every
        self.enabled = enabled
        self.n = self.count = 0
        self.start = self.logged = time.monotonic()
        bytes_ = unit == "B"
        self.bar = (
            tqdm(
                total=total, desc=desc, unit=unit, unit_scale=bytes_, unit_divisor=1024 if bytes_ else 1000, leave=False
            )
            if sys.stderr.isatty()
            else None
        )

    def update(self, n: float, count: int = 0) -> None:
        self.n += n
        self.count += count
        rate = f"{self.count / max(time.monotonic() - self.start, 1e-9):,.0f} {self.items}/s"
        if self.bar is not None:
            self.bar.set_postfix_str(rate, refresh=False)
            self.bar.update(n)
        elif self.enabled and time.monotonic() - self.logged >= self.every:
            self.logged = time.monotonic()
            log.info("%s, %s", self.meter(), rate)

    def meter(self) -> str:
        """tqdm's text for the work so far: share done, amount, elapsed and remaining time, rate."""
        elapsed = time.monotonic() - self.start
        bytes_ = self.unit == "B"
        return tqdm.format_meter(
            self.n, self.total, elapsed, prefix=self.desc, unit=self.unit, unit_scale=bytes_, ncols=0
        ).strip()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, kind: type | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
