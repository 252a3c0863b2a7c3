"""The batch plan's memory with one very long pair: linear in the pairs, whatever the longest.

    python -m bench.speed.plan_memory [--pairs 1000000] [--longest 8000] [--json bench/results/plan_memory.json]

``--pairs`` pairs of Tatoeba-like lengths (1 to 60 pieces a side, seeded), and one pair of ``--longest`` pieces (a
pasted paragraph in a held-out file): the plan of an epoch (``BatchPlan.compute``) at a budget that admits it, its
peak memory (numpy's allocations, traced) and its wall time, against the same corpus without the long pair. A table
of counts indexed by every length triple up to the longest (the plan before #82) would hold ``(longest + 2) ** 3``
counts; the record gives that size beside the measured peak.
"""

from __future__ import annotations

import argparse
import math
import time
import tracemalloc

import numpy as np

from bench.common import options, table, write_json
from nmt.data.batching import BatchPlan


def planned(src: np.ndarray, tgt: np.ndarray, max_tokens: int) -> dict:
    """One plan of ``src``/``tgt``: its peak traced memory and wall time."""
    tracemalloc.start()
    start = time.perf_counter()
    plan = BatchPlan.compute(src, tgt, max_tokens, math.inf)
    wall = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {"batches": len(plan.bounds) - 1, "peak_mib": round(peak / 2**20, 1),
            "bytes_per_pair": round(peak / len(src), 1), "seconds": round(wall, 2)}  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pairs", type=int, default=1_000_000, help="pairs of short lengths")
    p.add_argument("--longest", type=int, default=8000, help="the one long pair's pieces a side")
    options(p, "json")
    args = p.parse_args(argv)
    rng = np.random.default_rng(1)
    src = rng.integers(1, 61, args.pairs).astype(np.uint16)
    tgt = rng.integers(1, 61, args.pairs).astype(np.uint16)
    budget = args.longest + 2
    rows = [{"corpus": f"{args.pairs:,} short pairs", **planned(src, tgt, budget)}]
    src[args.pairs // 2], tgt[args.pairs // 2] = args.longest, args.longest
    rows.append({"corpus": f"... one of {args.longest:,} pieces", **planned(src, tgt, budget)})
    dense = (args.longest + 2) ** 3 * 8  # int64 counts of every (width, target, source) up to the longest
    print(table(rows, ["corpus", "batches", "peak_mib", "bytes_per_pair", "seconds"]))
    print(f"a table of every length triple up to the longest: {dense / 2**40:,.2f} TiB")
    write_json(args.json, {"pairs": args.pairs, "longest": args.longest, "max_tokens": budget, "rows": rows,
                           "dense_table_tib": round(dense / 2**40, 2)})  # fmt: skip


if __name__ == "__main__":
    main()
