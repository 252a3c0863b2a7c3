"""The tables of ``docs/results/speed.md`` on building training batches: the collate's time a batch, vectorised and
per row, and the padding of a bounded set of batch shapes (``bench/speed/collate_speed.py``)."""

from __future__ import annotations

from tables import Results, grid, num, pct, table, times


def ms(run: dict) -> str:
    """A median time a batch and its interquartile range."""
    return f"{run['median_ms']:.2f} ms ({run['q1_ms']:.2f}–{run['q3_ms']:.2f})"


@table("speed_collate")
def speed_collate(r: Results) -> str:
    data = r("collate_speed.json")
    budgets = sorted({run["max_tokens"] for run in data["runs"]})
    rows = []
    for budget in budgets:
        runs = {run["collate"]: run for run in data["runs"] if run["max_tokens"] == budget}
        vectorised, per_row = runs["vectorised"], runs["per_row"]
        rows.append([num(budget, 0), num(vectorised["tgt_tokens_per_batch"], 0), ms(per_row), f"**{ms(vectorised)}**",
                     times(per_row["median_ms"] / vectorised["median_ms"], 0), ms(runs["shapes"])])  # fmt: skip
    shapes = next(run["shapes"] for run in data["runs"] if run["collate"] == "shapes")
    header = ["max_tokens", "real target tokens a batch", "per-row loop (before)", "vectorised", "speed-up",
              f"vectorised, data.shapes={shapes} (its own batches)"]  # fmt: skip
    return grid(header, rows)


@table("speed_shapes")
def speed_shapes(r: Results) -> str:
    rows = [
        [num(p["max_tokens"], 0), p["shapes"] or "off", num(p["batches_per_epoch"], 0),
         f"{num(p['tgt_tokens_per_batch'], 0)} / {num(p['padded_tgt_per_batch'], 0)}", p["distinct_shapes"],
         pct(p["tgt_efficiency"]), pct(p["src_efficiency"])]
        for p in r("collate_speed.json")["padding"]
    ]  # fmt: skip
    header = ["max_tokens", "data.shapes", "batches an epoch", "real target tokens / B × T a batch",
              "distinct shapes (B, S, T)", "real target tokens / B × T", "real source tokens / B × S"]  # fmt: skip
    return grid(header, rows)
