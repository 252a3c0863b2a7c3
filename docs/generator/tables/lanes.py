"""The test lanes of docs/developing.md: how long each takes."""

from __future__ import annotations

from tables import Results, grid, table
from tables.models import cpu_of


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


@table("mutations")
def mutations(results: Results) -> str:
    """Each rule a slow test guards, broken on purpose (bench/suite/mutations.py), at each commit measured: whether
    the suite killed it, by which test, in how long."""
    runs = results("mutations.json")["runs"]

    def cell(row: dict) -> str:
        if row["status"] != "killed":
            return row["status"] + (f" ({row['why']})" if isinstance(row.get("why"), str) else "")
        return f"killed by `{row['by'].split('::')[-1]}` ({row['seconds'] / 60:.1f} min)"

    names = [m["name"] for m in next(iter(runs.values()))["mutations"]]
    by_run = {label: {m["name"]: m for m in run["mutations"]} for label, run in runs.items()}
    rows = [(f"`{n}`", next(iter(by_run.values()))[n]["rule"], *(cell(r[n]) if n in r else "not run"
             for r in by_run.values())) for n in names]  # fmt: skip
    rows.append(("", "**killed**", *(f"**{run['killed']} of {len(run['mutations'])}**" for run in runs.values())))
    heads = [f"{label} ({run['commit'][:7]})" for label, run in runs.items()]
    return grid(("mutation", "the rule", *heads), rows)


@table("quickstart")
def quickstart(results: Results) -> str:
    """How long the README's two commands take, from their records: the first run on the built-in corpus (once
    installed) and the full test lane; the fast lane for changing the code."""
    toy = next(r for r in results("toy_quality.json")["runs"] if r["model"] == "bahdanau")
    lanes = {r["lane"]: r for r in results("test_lanes.json")["lanes"]}
    full, fast = lanes["full"], lanes["fast"]
    cpus = " and ".join(dict.fromkeys(cpu_of(results, name) for name in ("toy_quality.json", "test_lanes.json")))
    return (f"Once installed, the first command trains for about {toy['wall_min']:.0f} min and the second runs its "
            f"{full['passed']:,} tests in about {minutes(full['seconds'])}, on a 2-core {cpus} (longer on a busy "
            f"machine). While changing the code, the fast lane takes {fast['seconds']:.0f} s: `{fast['command']}` "
            "([Developing](docs/developing.md)).")  # fmt: skip
