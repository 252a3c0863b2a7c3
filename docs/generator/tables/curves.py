"""Tables of docs/results/models.md's "Time to quality": dev BLEU against training minutes (``bench/curve.py``), the
minutes each run needs to reach each BLEU level, and ours against JoeyNMT 2.3.0 of the same family."""

from __future__ import annotations

from tables import Results, grid, num, table, times

SUMMARY = "curves/summary.json"


def label(name: str, run: dict) -> str:
    """A run as the table names it: the system, the experiment or model, and what its tag changed."""
    if run["system"] == "joeynmt":
        return f"JoeyNMT 2.3.0, {run['model']}"
    what = run.get("experiment") or f"tatoeba_{run['model']}"
    return f"ours, `{what}`" + (f" ({run['tag']})" if run.get("tag") else "")


def at(points: list[dict], minutes: float) -> float | None:
    """A curve's BLEU at ``minutes``, linearly interpolated between its points (a point a few seconds past ``minutes``,
    as the last snapshot of a budget is, counts as at it); None outside the curve."""
    for before, p in zip(points, points[1:]):
        if before["minutes"] <= minutes <= p["minutes"]:
            share = (minutes - before["minutes"]) / (p["minutes"] - before["minutes"])
            return before["bleu"] + share * (p["bleu"] - before["bleu"])
    near = [p["bleu"] for p in points if abs(p["minutes"] - minutes) < 0.1]
    return near[-1] if near else None


@table("time_to_quality")
def time_to_quality(results: Results) -> str:
    """Per run: dev BLEU at 15 and 30 minutes, the minutes to BLEU 20, 30, 40 and 50, its training updates."""
    summary = results(SUMMARY)
    rows = []
    for reach in summary["reach"]:
        run = results(f"curves/{reach['run']}.json")
        pts = run["points"]
        rows.append([
            label(reach["run"], run),
            num(at(pts, 15)),
            num(at(pts, 30)),
            *(num(reach[f"min_to_{t}"]) for t in (20, 30, 40, 50)),
            f"{pts[-1]['step']:,}" if pts and pts[-1].get("step") is not None else "–",
        ])
    header = ("run", "dev BLEU at 15 min", "at 30 min", *(f"minutes to BLEU {t}" for t in (20, 30, 40, 50)), "updates")
    cpu = summary["cpu"]
    flags = ", ".join(f for f in ("avx512_bf16", "amx_bf16") if cpu.get(f)) or "no bf16 instructions"
    return grid(header, rows) + f"\n\n{cpu['model']} ({flags}); – : not reached within the run."


@table("time_to_quality_joeynmt")
def time_to_quality_joeynmt(results: Results) -> str:
    """Ours against JoeyNMT of the same family: how much sooner ours reach the BLEU JoeyNMT has at its budget."""
    summary = results(SUMMARY)
    rows = [
        [
            label(c["ours"], results(f"curves/{c['ours']}.json")),
            label(c["joeynmt"], results(f"curves/{c['joeynmt']}.json")),
            num(c["joeynmt_bleu"]),
            num(c["joeynmt_min"], 0),
            num(c["ours_min"]),
            times(c["times_sooner"], 1),
        ]
        for c in summary["compared"]
    ]
    if not rows:
        return f"No JoeyNMT 2.3.0 curve measured on this CPU ({summary['cpu']['model']}) yet."
    header = ("ours", "JoeyNMT", "JoeyNMT's dev BLEU at its budget", "its minutes", "ours: minutes to it", "sooner")
    return grid(header, rows)
