"""The test lanes of docs/developing.md: how long each takes."""

from __future__ import annotations

from tables import Results, grid, table


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min"


@table("test_lanes")
def test_lanes(results: Results) -> str:
    rows = [
        (r["lane"], f"`{r['command']}`", minutes(r["seconds"]), r.get("passed", 0), r.get("skipped", 0))
        for r in results("test_lanes.json")["lanes"]
    ]
    return grid(("lane", "command", "wall-clock", "passed", "skipped"), rows)


@table("test_lanes_slowest")
def test_lanes_slowest(results: Results) -> str:
    """The test files that took longest in the full lane (pytest's durations, summed by file)."""
    full = next(r for r in results("test_lanes.json")["lanes"] if r["lane"] == "full")
    rows = [(f"`{r['file']}`", f"{r['seconds'] / 60:.1f} min") for r in full["slowest_files"]]
    return grid(("test file", "time in the full lane, on its worker"), rows)
