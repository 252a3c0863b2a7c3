"""The README's quick start (its two commands with their measured times) and the test lanes of docs/developing.md."""

from __future__ import annotations

from tables import Results, grid, table


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min"


@table("quick_start")
def quick_start(results: Results) -> str:
    train = next(r for r in results("toy_quality.json")["runs"] if r["model"] == "bahdanau")
    full = next(r for r in results("test_lanes.json")["lanes"] if r["lane"] == "full")
    lines = [
        (
            "pip install -r requirements.txt && python train.py",
            f"train on the built-in corpus (~{train['wall_min']:.0f} min on 2 CPU cores)",
        ),
        ("python -m pytest -q tests", f"run the tests (~{minutes(full['seconds'])} on 2 CPU cores)"),
    ]
    width = max(len(c) for c, _ in lines) + 3
    return "```bash\n" + "\n".join(f"{c:<{width}}# {what}" for c, what in lines) + "\n```"


@table("test_lanes")
def test_lanes(results: Results) -> str:
    rows = [
        (r["lane"], f"`{r['command']}`", minutes(r["seconds"]), r.get("passed", 0), r.get("skipped", 0))
        for r in results("test_lanes.json")["lanes"]
    ]
    return grid(("lane", "command", "wall-clock", "passed", "skipped"), rows)
