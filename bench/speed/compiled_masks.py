"""Masks in Inductor's CPU kernels: boolean against byte, the reason ``nmt/models/dropout.py`` keeps its masks as bytes.

    python -m bench.speed.compiled_masks [--rows 2400] [--cols 1024] [--threads 2] [--repeats 30]

Times, eager and compiled (``torch.compile(dynamic=True)``, Inductor's C++ kernels), at the size of one
feed-forward activation of the reference Transformer batch: computing a mask from a float tensor and storing it
(``x <= 0``: what a ReLU's backward keeps), and applying a stored mask (``x * mask``: what dropout does), with the
mask a boolean and a byte (uint8) tensor. Median milliseconds a call, written to JSON.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from bench.common import options, table, write_json


def median_ms(fn: Callable[..., torch.Tensor], *args: torch.Tensor, repeats: int) -> float:
    for _ in range(3):  # warm-up; compiles on the first call
        fn(*args)
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - started)
    return round(1000 * statistics.median(times), 3)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=2400)
    p.add_argument("--cols", type=int, default=1024)
    p.add_argument("--repeats", type=int, default=30)
    options(p, "threads", "json")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    x = torch.randn(args.rows, args.cols)
    masks = {"bool": x > 0, "uint8": (x > 0).to(torch.uint8)}
    cases: dict[str, tuple[Callable[..., torch.Tensor], tuple[torch.Tensor, ...]]] = {
        "store x <= 0 as bool": (lambda x: x <= 0, (x,)),
        "store x <= 0 as uint8": (lambda x: (x <= 0).to(torch.uint8), (x,)),
        **{f"x * mask ({kind})": (lambda x, m: x * m, (x, m)) for kind, m in masks.items()},
    }
    rows = []
    for what, (fn, inputs) in cases.items():
        torch._dynamo.reset()
        eager = median_ms(fn, *inputs, repeats=args.repeats)
        compiled = median_ms(torch.compile(fn, dynamic=True), *inputs, repeats=args.repeats)
        rows.append(
            {"what": what, "eager_ms": eager, "compiled_ms": compiled, "compiled_vs_eager": round(compiled / eager, 2)}
        )
    print(table(rows, ["what", "eager_ms", "compiled_ms", "compiled_vs_eager"]))
    write_json(args.json, {"threads": args.threads, "shape": [args.rows, args.cols], "runs": rows})


if __name__ == "__main__":
    main()
