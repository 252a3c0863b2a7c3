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
