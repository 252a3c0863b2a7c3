"""An ordered parallel map over blocks of a corpus, with a bounded number of blocks in flight."""

from __future__ import annotations

import multiprocessing as mp
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any


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
    with context.Pool(num_proc, initializer=init, initargs=init_args) as pool:
        pending: deque = deque()
        for job in jobs:
            pending.append(pool.apply_async(fn, (job,)))
            if len(pending) >= 2 * num_proc:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()
