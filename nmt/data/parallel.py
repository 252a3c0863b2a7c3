"""An ordered parallel map over blocks of a corpus, with a bounded number of blocks in flight.

Workers ignore Ctrl-C: the parent alone decides, and on Ctrl-C (or any error) it stops them at once,
so an interrupted preparation ends within moments and no worker prints a traceback. A worker that
dies (the out-of-memory killer, ``kill -9``) ends the map with one line instead of a hang: the parent
watches the workers' exit codes while it waits for a result, whatever ``concurrent.futures`` makes of it.
"""

from __future__ import annotations

import multiprocessing as mp
import signal
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures import TimeoutError as FuturesTimeout
from concurrent.futures.process import BrokenProcessPool
from typing import Any


class WorkerDied(OSError):
    """A preparation process ended without its result."""


def _worker_init(init: Callable | None, init_args: tuple) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole process group: the parent handles it
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # blocked since the fork (see _submit)
    if init:
        init(*init_args)


def _submit(pool: ProcessPoolExecutor, fn: Callable, job: Any) -> Future:
    """``pool.submit`` with Ctrl-C held back: a submit may fork a worker, and a worker forked with Ctrl-C pending
    would die in its start-up before it could ignore it. The parent takes a Ctrl-C right after."""
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        return pool.submit(fn, job)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def in_order(
    fn: Callable, jobs: Iterator, num_proc: int, init: Callable | None = None, init_args: tuple = ()
) -> Iterator[Any]:
    """``fn`` over ``jobs`` in ``num_proc`` processes, results in job order, at most 2 x num_proc blocks in flight."""
    if num_proc <= 1:
        if init:
            init(*init_args)
        yield from map(fn, jobs)
        return
    context = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()
    others = {p.pid for p in mp.active_children()}  # children that are not this pool's
    pool = ProcessPoolExecutor(num_proc, mp_context=context, initializer=_worker_init, initargs=(init, init_args))
    pending: deque[Future] = deque()
    workers: dict[int, mp.process.BaseProcess] = {}  # the pool's, as they start

    def seen() -> None:  # a worker that died is no longer among the active children: keep each one seen
        workers.update((p.pid, p) for p in mp.active_children() if p.pid not in others)

    def result(future: Future) -> Any:
        """The future's result; a worker that has exited (they run until shutdown) breaks the pool at once,
        seen by its exit code, not through the pool's own bookkeeping, so how busy the machine is cannot
        delay or hide it."""
        while True:
            try:
                return future.result(timeout=0.1)
            except FuturesTimeout:
                seen()
                if any(p.exitcode is not None for p in workers.values()):
                    raise BrokenProcessPool("a worker exited") from None

    try:
        for job in jobs:
            pending.append(_submit(pool, fn, job))
            seen()  # a submit may start a worker
            if len(pending) >= 2 * num_proc:
                yield result(pending.popleft())
        while pending:
            yield result(pending.popleft())
    except BrokenProcessPool:  # found at a result, or at the next submit
        _stop(pool, others)
        raise WorkerDied(
            "a preparation process died without its result (killed, or out of memory?); nothing was kept: "
            "run again, with a smaller data.prepare.num_proc or data.prepare.block_lines if memory is short"
        ) from None
    except BaseException:  # Ctrl-C, an error in a block, or the consumer giving up
        _stop(pool, others)
        raise
    pool.shutdown()


def _stop(pool: ProcessPoolExecutor, others: set[int]) -> None:
    """End the pool's workers now: queued blocks are dropped, running ones killed (they hold nothing to keep)."""
    workers = [p for p in mp.active_children() if p.pid not in others]
    pool.shutdown(wait=False, cancel_futures=True)
    for p in workers:
        p.kill()
    for p in workers:
        p.join(timeout=5)
