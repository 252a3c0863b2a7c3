"""Runs of ``bench/alignment/alignment.py --adapt-one-run`` side by side. eflomal's sampler is seeded at random, so each
run draws its own eflomal links, and with them its own guide for the adapting model: one run says little about whether
the model aligns better than eflomal. This reads several runs' JSON files and gives, for each run, eflomal's AER
(forward, intersection) and the adapted model's at each number of epochs E, with E chosen on half the gold (the
cross-validated figure, mean over halvings) and E whose links agree best with the guide; across the runs the mean,
min and max of each, and of the model's AER minus eflomal's in the same run (negative: the model aligns better).

    python -m bench.alignment.alignment_draws bench/results/alignment_by_epoch/long_guided_run*.json \
        --json bench/results/alignment_by_epoch/summary.json
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from bench.common import options, table, write_json

EFLOMAL = ("forward", "intersection")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", help="JSON files of bench/alignment/alignment.py --adapt-one-run")
    options(p, "json", json="bench/results/alignment_by_epoch/summary.json")
    args = p.parse_args()
    rows = [one_run(Path(f)) for f in args.runs]
    models = list(dict.fromkeys(k for r in rows for k in r["model"]))
    columns = [*(f"eflomal {x}" for x in EFLOMAL), *models]
    runs = [{"run": r["file"], **{f"eflomal {x}": r["eflomal"][x] for x in EFLOMAL}} for r in rows]
    for run, r in zip(runs, rows):
        run |= {m: r["model"].get(m) for m in models}
    spread = {c: spread_of([r[c] for r in runs if r[c] is not None]) for c in columns}
    versus = {  # the model minus eflomal in the same run
        f"{m} - eflomal {x}": spread_of([r["model"][m] - r["eflomal"][x] for r in rows if m in r["model"]])
        for m in models
        for x in EFLOMAL
    }
    print(table(runs, ["run", *columns]))
    print(table([{"of": k, **v} for k, v in (spread | versus).items()], ["of", "mean", "min", "max", "runs"]))
    write_json(args.json, {"runs": runs, "across_runs": spread, "model_minus_eflomal": versus})


def one_run(path: Path) -> dict:
    """eflomal's AER and the one adapted model's at each number of epochs, E chosen on half the gold and E closest to
    the guide, from one run's JSON."""
    dev = json.loads(path.read_text())["hansards_dev"]
    (model,) = dev["adapted_by_epoch"].values()
    aer = {f"{e} epochs": x["aer"] for e, x in sorted(model["epochs"].items(), key=lambda x: int(x[0]))}
    aer["E chosen on half the gold"] = model["cross_validated"]["aer_mean"]
    if "closest_to_guide" in model:
        aer["E closest to the guide"] = model["closest_to_guide"]["aer"]
    return {"file": path.name, "eflomal": {x: dev["eflomal"]["aer"][x]["aer"] for x in EFLOMAL}, "model": aer}


def spread_of(values: list[float]) -> dict:
    return {
        "mean": round(statistics.mean(values), 4),
        "min": round(min(values), 4),
        "max": round(max(values), 4),
        "runs": len(values),
    }


if __name__ == "__main__":
    main()
