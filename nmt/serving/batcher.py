"""Dynamic batching: lines of requests that arrive together are translated as one batch, off the event loop.

Each request puts its lines in a bounded queue under a key; requests share a batch only when their keys (the
search options) are equal. One worker task takes the oldest request and adds the queued requests of its key,
in arrival order, while they fit a token budget, for at most ``max_wait`` seconds after the oldest arrived. The
batch runs in one worker thread, so the event loop keeps answering (``/health`` during a long batch), and each
request gets back exactly its own lines' results. While a batch runs, the next one gathers: under load batches
grow by themselves, and a lone request waits at most ``max_wait``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)


class QueueFull(Exception):
    """The queue has no room for a request's lines; retry after ``retry_after`` seconds."""

    def __init__(self, waiting: int, limit: int, retry_after: int = 1):
        super().__init__(f"the queue is full ({waiting} lines waiting, at most {limit}): retry later")
        self.retry_after = retry_after


@dataclass
class _Job:
    key: Hashable
    lines: Sequence[Any]  # a source line each (or a source and its translation: whatever run takes)
    cost: int  # source tokens
    future: asyncio.Future
    arrived: float = field(default_factory=time.monotonic)


@dataclass
class Stats:
    """What the batcher has done: requests, lines and batches run, seconds spent running them (the worker's busy
    time), and the lines waiting now."""

    requests: int = 0
    lines: int = 0
    batches: int = 0
    busy_s: float = 0.0
    waiting: int = 0

    def as_dict(self) -> dict[str, Any]:
        mean = self.lines / self.batches if self.batches else 0.0
        return {**self.__dict__, "busy_s": round(self.busy_s, 3), "mean_batch_lines": round(mean, 2)}


class Batcher:
    """Runs ``run(key, lines) -> results`` (one result per line, in order) on batches of queued requests.

    ``cost(line)`` is a line's source tokens; a batch holds requests worth up to ``max_tokens`` (at least one
    request). The queue holds at most ``max_queue`` lines; a request that does not fit raises :class:`QueueFull`.
    With ``enabled`` False every request runs alone, at once (no waiting, no sharing).
    """

    def __init__(
        self,
        run: Callable[[Hashable, list[str]], list[Any]],
        cost: Callable[[str], int] = lambda line: 1,
        max_wait: float = 0.005,
        max_tokens: int = 2048,
        max_queue: int = 1024,
        enabled: bool = True,
    ):
        self.run, self.cost = run, cost
        self.max_wait, self.max_tokens, self.max_queue, self.enabled = max_wait, max_tokens, max_queue, enabled
        self.stats = Stats()
        self._queue: deque[_Job] = deque()
        self._arrival = asyncio.Event()
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="translate")
        self._worker: asyncio.Task | None = None
        self._busy = False  # a batch is running

    async def start(self) -> None:
        self._worker = asyncio.create_task(self._work(), name="batcher")

    async def stop(self) -> None:
        """Finish what is queued, then stop the worker and its thread."""
        while self._queue or self._busy:
            await asyncio.sleep(0.01)
        if self._worker is not None:
            self._worker.cancel()
            await asyncio.gather(self._worker, return_exceptions=True)
        self._executor.shutdown(wait=True)

    async def submit(self, key: Hashable, lines: Sequence[Any], cost: int | None = None) -> list[Any]:
        """``lines``' results, once a batch holding them has run; :class:`QueueFull` if there is no room.
        ``cost``: their source tokens where the caller has counted them (else ``self.cost`` counts)."""
        if self.stats.waiting + len(lines) > self.max_queue:
            raise QueueFull(self.stats.waiting, self.max_queue)
        cost = sum(self.cost(line) for line in lines) if cost is None else cost
        job = _Job(key, lines, cost, asyncio.get_running_loop().create_future())
        self._queue.append(job)
        self.stats.waiting += len(lines)
        self.stats.requests += 1
        self._arrival.set()
        return await job.future  # a client that goes away cancels it; the worker then skips the job

    async def _work(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = await self._collect()
            lines = [line for job in batch for line in job.lines]
            self._busy, started = True, time.monotonic()
            try:
                results = await loop.run_in_executor(self._executor, self.run, batch[0].key, lines)
            except Exception as e:  # noqa: BLE001 - the requests of this batch get the error, the server goes on
                log.exception("a batch of %d lines failed", len(lines))
                for job in batch:
                    if not job.future.done():
                        job.future.set_exception(e)
                continue
            finally:
                self._busy = False
                self.stats.busy_s += time.monotonic() - started
            self.stats.batches += 1
            self.stats.lines += len(lines)
            start = 0
            for job in batch:
                if not job.future.done():
                    job.future.set_result(results[start : start + len(job.lines)])
                start += len(job.lines)

    async def _collect(self) -> list[_Job]:
        """The next batch: the oldest request and, while batching, later ones of its key within the budget,
        gathered until the budget is full or ``max_wait`` after the oldest arrived."""
        while True:
            self._drop_cancelled()
            if not self._queue:
                self._arrival.clear()
                await self._arrival.wait()
                continue
            first = self._queue[0]
            while self.enabled and not self._fitting(first)[1]:
                left = first.arrived + self.max_wait - time.monotonic()
                if left <= 0:
                    break
                self._arrival.clear()
                try:
                    await asyncio.wait_for(self._arrival.wait(), left)
                except TimeoutError:  # asyncio's own from Python 3.11, the oldest requires-python admits
                    pass
            batch = self._fitting(first)[0] if self.enabled else [first]
            batch = [job for job in batch if not job.future.done()]  # a client may have gone while it gathered
            if batch:
                for job in batch:
                    self._queue.remove(job)
                    self.stats.waiting -= len(job.lines)
                return batch

    def _fitting(self, first: _Job) -> tuple[list[_Job], bool]:
        """The queued requests of ``first``'s key that fit the token budget, and whether the budget is full."""
        batch, tokens = [], 0
        for job in self._queue:
            if job.key != first.key:
                continue
            if batch and tokens + job.cost > self.max_tokens:
                return batch, True
            batch.append(job)
            tokens += job.cost
        return batch, tokens >= self.max_tokens

    def _drop_cancelled(self) -> None:
        for job in [j for j in self._queue if j.future.done()]:
            self._queue.remove(job)
            self.stats.waiting -= len(job.lines)
